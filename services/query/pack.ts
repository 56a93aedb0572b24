import type { ContextItem } from "../core/query-types.ts";
import { withoutSaidDay } from "../core/text/record-text.ts";
import { countTokens } from "../core/tokens.ts";

export const CONTEXT_HEADER = "Memories (dated, with sources; newest facts override older ones):";

/**
 * What the packer ranks: a context item plus where it was said (session and the moment), which
 * place it in the history; both optional for callers that have neither (then the item's date).
 */
export type PackInput = Omit<ContextItem, "tokens"> & { session?: string; saidAt?: string };

const day = (iso: string): string => iso.slice(0, 10);

const saidAtOf = (item: PackInput): string => item.saidAt ?? item.date;

/** Items said in one session on one day share one header: "[2023-05-08] conv-26 session_3:". */
const groupKey = (item: PackInput): string =>
  `${item.conversation}\u0000${item.session ?? ""}\u0000${day(saidAtOf(item))}`;

const groupHeader = (item: PackInput): string =>
  `[${day(saidAtOf(item))}] ${item.conversation}${item.session ? ` ${item.session}` : ""}:`;

const cite = (item: PackInput): string => `[${item.turnIds.join(",")}]`;

/**
 * One item's line under its header. A raw turn is "Speaker: text [D1:3]", its label left out when
 * the line above is a turn by the same speaker; a record is "- text [D1:3,D1:4]" (it names its
 * subject), with its event date in parentheses when that is not the day it was said. A record's
 * own prefix day ("Ana (2023-05-08): ...") is left out: it is the day its header gives, and
 * repeating it cost about 7 of a record's ~57 tokens, budget that now packs further items.
 */
export const renderItem = (item: PackInput, previous?: PackInput): string => {
  if (item.kind === "turn") {
    const speaker = item.speakers[0] ?? "";
    const continues = previous?.kind === "turn" && previous.speakers[0] === speaker;
    return `${continues || speaker === "" ? "  " : `${speaker}: `}${item.text} ${cite(item)}`;
  }
  const eventDay = day(item.date);
  const saidDay = day(saidAtOf(item));
  const dated = eventDay !== saidDay ? `(${eventDay}) ` : "";
  return `- ${dated}${withoutSaidDay(item.text, saidDay)} ${cite(item)}`;
};

export interface Packed {
  context: string;
  tokens: number;
  items: ContextItem[];
}

const byHistory = (a: PackInput, b: PackInput): number =>
  saidAtOf(a).localeCompare(saidAtOf(b)) || a.date.localeCompare(b.date) || a.id.localeCompare(b.id);

/** The chosen items as the context: groups oldest first, items in the order they were said. */
const render = (chosen: readonly PackInput[]): string => {
  const groups = new Map<string, PackInput[]>();
  for (const item of [...chosen].sort(byHistory)) {
    const key = groupKey(item);
    const list = groups.get(key);
    if (list) list.push(item);
    else groups.set(key, [item]);
  }
  const lines = [CONTEXT_HEADER];
  for (const items of groups.values()) {
    lines.push(groupHeader(items[0] as PackInput));
    items.forEach((item, i) => {
      lines.push(renderItem(item, items[i - 1]));
    });
  }
  return lines.join("\n");
};

const toContextItem = (item: PackInput, tokens: number): ContextItem => {
  const { session: _session, saidAt: _saidAt, ...rest } = item;
  return { ...rest, tokens };
};

/**
 * Greedy packing in relevance order into a token budget counted with the real tokenizer; an item
 * that does not fit is skipped so a smaller later one may still go in. An item whose source turns
 * are all in the context already is skipped too: a record and the raw turn it came from (or two
 * copies of a turn) would spend the budget twice on the same evidence, and the first-ranked one
 * stands for it. The packed items are rendered grouped by session and day under one dated
 * header, oldest first, which is how a reader follows a history; an item's own tokens are counted
 * with its speaker label, and a header's when its group opens.
 */
export const packContext = (ranked: readonly PackInput[], budget: number): Packed => {
  let used = countTokens(`${CONTEXT_HEADER}\n`);
  const chosen: { item: PackInput; tokens: number }[] = [];
  const covered = new Set<string>();
  const openGroups = new Set<string>();
  for (const item of ranked) {
    const sources = item.turnIds.map((t) => `${item.conversation}\u0000${t}`);
    if (sources.length > 0 && sources.every((s) => covered.has(s))) continue;
    const key = groupKey(item);
    const header = openGroups.has(key) ? 0 : countTokens(`${groupHeader(item)}\n`);
    const tokens = countTokens(`${renderItem(item)}\n`);
    if (used + header + tokens > budget) continue;
    used += header + tokens;
    openGroups.add(key);
    for (const s of sources) covered.add(s);
    chosen.push({ item, tokens });
  }
  // Line counts are upper bounds (a continued speaker drops its label), but joining can merge
  // tokens across a newline, so re-check the whole.
  while (chosen.length > 0) {
    const context = render(chosen.map((c) => c.item));
    const tokens = countTokens(context);
    if (tokens <= budget) return { context, tokens, items: chosen.map((c) => toContextItem(c.item, c.tokens)) };
    chosen.pop();
  }
  return { context: "", tokens: 0, items: [] };
};
