import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../core/config.ts";
import { type LocomoConversation, loadLocomo } from "../core/datasets/locomo.ts";
import type { MemoryRecord, Segment } from "../core/types.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { drainWithProgress } from "./commands.ts";

const SAMPLE = join(dirname(fileURLToPath(import.meta.url)), "sample-locomo.json");

const pickConversation = (file: string, id: string): LocomoConversation => {
  const source = existsSync(file) ? file : SAMPLE;
  if (source === SAMPLE) console.log(`(${file} not found: using the bundled sample conversation)`);
  const all = loadLocomo(source);
  const conv = all.find((c) => c.id === id) ?? all[0];
  if (!conv) throw new Error(`no conversation in ${source}`);
  return conv;
};

const clip = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** One question per category first (1-4), then the rest in file order: a spread, not a pick. */
const spread = (conv: LocomoConversation, n: number) => {
  const scored = conv.questions.filter((q) => q.category >= 1 && q.category <= 4 && q.evidence.length > 0);
  const firsts = [1, 2, 3, 4].map((c) => scored.find((q) => q.category === c)).filter((q) => q !== undefined);
  return [...firsts, ...scored.filter((q) => !firsts.includes(q))].slice(0, n);
};

export const runDemo = async (
  config: Config,
  o: { data: string; conversation: string; questions: number; budget: number },
): Promise<void> => {
  const started = performance.now();
  const conv = pickConversation(o.data, o.conversation);
  const dataDir = mkdtempSync(join(tmpdir(), "memory-demo-"));
  const segments: { segment: Segment; records: readonly MemoryRecord[] }[] = [];
  const opened = await openEmbeddedEngine(
    { ...config, dataDir },
    {
      observer: {
        stageEvent: () => {},
        segmentClosed: () => {},
        recordsWritten: () => {},
        segmentIndexed: (segment, records) => segments.push({ segment, records }),
      },
    },
  );
  try {
    console.log(`\n== ${conv.id}: ${conv.turns.length} turns between ${conv.speakers.join(" and ")}`);
    for (const t of conv.turns.slice(0, 4))
      console.log(`  ${t.turnId} [${t.timestamp.slice(0, 10)}] ${t.speaker}: ${clip(t.text, 100)}`);
    const tenant = "demo";
    const ingestStart = performance.now();
    await opened.engine.ingest(tenant, conv.id, conv.turns);
    await opened.engine.flush(tenant, conv.id);
    await drainWithProgress(opened.engine, conv.turns.length, "ingest");
    const ingestS = (performance.now() - ingestStart) / 1000;
    const records = segments.reduce((n, s) => n + s.records.length, 0);
    console.log(
      `\n== ingested in ${ingestS.toFixed(1)} s (${(conv.turns.length / ingestS).toFixed(1)} turns/s): ${segments.length} segments, ${records} records, no LLM calls`,
    );
    console.log("\n== first segments (why each one closed)");
    for (const { segment } of segments.slice(0, 4)) {
      const cut = segment.decisions.at(-1);
      const why = cut?.cut ? `p=${cut.p.toFixed(2)} surprise=${cut.surprise.toFixed(2)}` : "";
      console.log(
        `  ${segment.turns[0]?.turnId}..${segment.turns.at(-1)?.turnId} (${segment.turns.length} turns, ${segment.tokens} tokens) closed by ${segment.closedBy} ${why}`,
      );
    }
    console.log("\n== sample records");
    for (const r of segments.flatMap((s) => s.records).slice(0, 8))
      console.log(
        `  [${r.type}] ${clip(r.text, 140)}  {${r.entities.map((e) => e.name).join(", ")}} <${r.source.turnIds.join(",")}>`,
      );
    for (const q of spread(conv, o.questions)) {
      const result = await opened.engine.query(tenant, {
        question: q.question,
        budget: o.budget,
        conversation: conv.id,
      });
      const covered = new Set(result.items.flatMap((i) => i.turnIds));
      const hit = q.evidence.filter((e) => covered.has(e)).length;
      console.log(`\n== Q (category ${q.category}): ${q.question}`);
      console.log(
        `   expected answer: ${q.answer}; evidence ${q.evidence.join(", ")}: ${hit}/${q.evidence.length} in context`,
      );
      console.log(
        `   ${result.items.length} items, ${result.contextTokens}/${result.budget} tokens, ${result.cost.ms.toFixed(0)} ms, type ${result.plan.questionType}, routes ${result.plan.routes.join(",")}`,
      );
      console.log(
        result.context
          .split("\n")
          .slice(0, 9)
          .map((l) => `   ${clip(l, 160)}`)
          .join("\n"),
      );
      if (result.items.length > 8) console.log(`   … ${result.items.length - 8} more`);
    }
    console.log(`\ndemo finished in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await opened.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
};
