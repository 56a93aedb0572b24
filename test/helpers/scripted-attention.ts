/**
 * A TurnAttention for unit tests of the decision logic (the model itself is tested in
 * onnx-attention.test.ts): one token per word, and every token of a window's last turn puts a
 * scripted share of its attention on the turn before it, the rest on itself; specials get none.
 * The share comes from `shareOf(previous, current)`. Records every attend() call.
 */
import type { TurnAttention, TurnSpan, WindowAttention } from "../../services/core/ports.ts";

export const scriptedAttention = (
  shareOf: (previous: string, current: string) => number,
): TurnAttention & { calls: string[][][] } => {
  const calls: string[][][] = [];
  return {
    id: "scripted-attention",
    capacity: 254,
    calls,
    attend: async (windows) => {
      calls.push(windows.map((w) => [...w]));
      return windows.map((w): WindowAttention => {
        const words = w.map((t) => t.split(/\s+/).filter(Boolean).length);
        const size = words.reduce((a, b) => a + b, 0) + 2;
        const spans: TurnSpan[] = [];
        let at = 1;
        for (const n of words) {
          spans.push({ start: at, end: at + n });
          at += n;
        }
        const attention = new Float32Array(size * size);
        for (let i = 0; i < size; i++) attention[i * size + i] = 1; // default: each token on itself
        const last = spans.length - 1;
        if (last >= 1) {
          const prev = spans[last - 1] as TurnSpan;
          const cur = spans[last] as TurnSpan;
          const share = shareOf(w[last - 1] as string, w[last] as string);
          for (let q = cur.start; q < cur.end; q++) {
            attention[q * size + q] = 0;
            for (let k = prev.start; k < prev.end; k++) attention[q * size + k] = share / (prev.end - prev.start);
            for (let k = cur.start; k < cur.end; k++)
              attention[q * size + k] = (attention[q * size + k] ?? 0) + (1 - share) / (cur.end - cur.start);
          }
        }
        return { attention, size, spans };
      });
    },
    close: async () => {},
  };
};
