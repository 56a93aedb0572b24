import type { ContextItem } from "../core/query-types.ts";
import { withoutSaidDay } from "../core/text/record-text.ts";
import { countTokens } from "../core/tokens.ts";
import { citation, prefixNote, sharedPrefix } from "./cite.ts";

export const CONTEXT_HEADER = "Memories (dated, with sources; newest facts override older ones):";

/** The context header when every item is from one conversation, named there once: "Memories of conv-26 (…):". */
const contextHeader = (conversation?: string): string =>
  conversation === undefined ? CONTEXT_HEADER : CONTEXT_HEADER.replace("Memories", `Memories of ${conversation}`);

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

/**
 * "[2023-05-08] conv-26 session_3:", without the conversation when the context header names it,
 * and with " (D3:…)" before the colon when its lines cite under that prefix ("[…5]").
 */
const groupHeader = (item: PackInput, named = true, prefix = ""): string =>
  `[${day(saidAtOf(item))}]${named ? ` ${item.conversation}` : ""}${item.session ? ` ${item.session}` : ""}${
    prefix ? prefixNote(prefix) : ""
  }:`;

/**
 * An item's sources: "[D3:5-6]", or "[…5-6]" under a header giving the prefix "D3:". With prefix
 * null every id is written whole, one by one ("[D3:5,D3:6]"): the longest form, which the first
 * packing pass prices every line at.
 */
const cite = (item: PackInput, prefix: string | null): string =>
  prefix === null ? `[${item.turnIds.join(",")}]` : citation(item.turnIds, prefix);

/**
 * One item's line under its header. A raw turn is "Speaker: text [D1:3]", its label left out when
 * the line above is a turn by the same speaker; a record is "- text [D1:3-4]" (it names its
 * subject), with its event date in parentheses when that is not the day it was said. A record's
 * own prefix day ("Ana (2023-05-08): ...") is left out: it is the day its header gives, and
 * repeating it cost about 7 of a record's ~57 tokens, budget that now packs further items.
 */
export const renderItem = (item: PackInput, previous?: PackInput, prefix: string | null = ""): string => {
  if (item.kind === "turn") {
    const speaker = item.speakers[0] ?? "";
    const continues = previous?.kind === "turn" && previous.speakers[0] === speaker;
    return `${continues || speaker === "" ? "  " : `${speaker}: `}${item.text} ${cite(item, prefix)}`;
  }
  const eventDay = day(item.date);
  const saidDay = day(saidAtOf(item));
  const dated = eventDay !== saidDay ? `(${eventDay}) ` : "";
  return `- ${dated}${withoutSaidDay(item.text, saidDay)} ${cite(item, prefix)}`;
};

export interface Packed {
  context: string;
  tokens: number;
  items: ContextItem[];
}

/** A line with its newline, counted as if it continued no speaker (an upper bound). */
const lineTokens = (item: PackInput, prefix: string | null): number =>
  countTokens(`${renderItem(item, undefined, prefix)}\n`);

/** How a group is written and what it costs: its header and lines, each with its newline. */
interface GroupForm {
  /** The ids' shared prefix, written once in the header; "" when the ids are written whole. */
  prefix: string;
  tokens: number;
}

/**
 * A group's cheaper form, with the conversation named in its header and without: its lines cite
 * under the ids' shared prefix only where the header's " (D3:…)" costs less than the prefix
 * repeated on every line (one line seldom pays for it, three usually do).
 */
const groupForms = (items: readonly PackInput[]): { named: GroupForm; unnamed: GroupForm } => {
  const head = items[0] as PackInput;
  const whole = items.reduce((n, i) => n + lineTokens(i, ""), 0);
  const prefix = sharedPrefix(items.flatMap((i) => i.turnIds));
  const factored = prefix === "" ? 0 : items.reduce((n, i) => n + lineTokens(i, prefix), 0);
  const form = (named: boolean): GroupForm => {
    const plain = countTokens(`${groupHeader(head, named)}\n`) + whole;
    if (prefix === "") return { prefix, tokens: plain };
    const short = countTokens(`${groupHeader(head, named, prefix)}\n`) + factored;
    return short < plain ? { prefix, tokens: short } : { prefix: "", tokens: plain };
  };
  return { named: form(true), unnamed: form(false) };
};

/**
 * The token count of a set of items as the context header plus each group's form (an upper bound
 * of the rendered text, lines being counted with their speaker labels), kept per group so that
 * trying one more item re-counts only its group. Both ways of naming the conversation are kept:
 * in every group header, or once in the context header when all items share it and that is shorter.
 */
class Layout {
  private readonly groups = new Map<string, PackInput[]>();
  private readonly costs = new Map<string, { named: number; unnamed: number }>();
  private readonly conversations = new Set<string>();
  private named = 0;
  private unnamed = 0;

  constructor(items: readonly PackInput[] = []) {
    for (const item of items) this.add(item);
  }

  private static totals(named: number, unnamed: number, conversations: ReadonlySet<string>) {
    const [only] = conversations;
    return {
      named: countTokens(`${CONTEXT_HEADER}\n`) + named,
      unnamed:
        conversations.size === 1 && only !== undefined
          ? countTokens(`${contextHeader(only)}\n`) + unnamed
          : Number.POSITIVE_INFINITY,
    };
  }

  /** The conversation, when the context header names it instead of every group header. */
  get namedOnce(): string | undefined {
    const t = Layout.totals(this.named, this.unnamed, this.conversations);
    return t.unnamed < t.named ? [...this.conversations][0] : undefined;
  }

  private cost(key: string, items: readonly PackInput[]): { named: number; unnamed: number } {
    const forms = groupForms(items);
    const before = this.costs.get(key) ?? { named: 0, unnamed: 0 };
    return { named: forms.named.tokens - before.named, unnamed: forms.unnamed.tokens - before.unnamed };
  }

  /** The count with `item` added; nothing changes. */
  tokensWith(item: PackInput): number {
    const key = groupKey(item);
    const delta = this.cost(key, [...(this.groups.get(key) ?? []), item]);
    const t = Layout.totals(
      this.named + delta.named,
      this.unnamed + delta.unnamed,
      new Set([...this.conversations, item.conversation]),
    );
    return Math.min(t.named, t.unnamed);
  }

  add(item: PackInput): void {
    const key = groupKey(item);
    const items = [...(this.groups.get(key) ?? []), item];
    const delta = this.cost(key, items);
    const before = this.costs.get(key) ?? { named: 0, unnamed: 0 };
    this.groups.set(key, items);
    this.costs.set(key, { named: before.named + delta.named, unnamed: before.unnamed + delta.unnamed });
    this.named += delta.named;
    this.unnamed += delta.unnamed;
    this.conversations.add(item.conversation);
  }
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
  const once = new Layout(chosen).namedOnce;
  const lines = [contextHeader(once)];
  for (const items of groups.values()) {
    const forms = groupForms(items);
    const { prefix } = once === undefined ? forms.named : forms.unnamed;
    lines.push(groupHeader(items[0] as PackInput, once === undefined, prefix));
    items.forEach((item, i) => {
      lines.push(renderItem(item, items[i - 1], prefix));
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
 * header, oldest first, which is how a reader follows a history.
 *
 * Two passes. The first prices every line at its longest form (speaker label, every source id
 * whole) and each header as its group opens. The second measures the chosen items as they are
 * written (ranges, a group's shared id prefix and the one conversation said once, each where it
 * is shorter) and fills the tokens that frees with the next items in relevance order that fit.
 * So how compactly sources can be written only ever adds items: pricing the compact form in one
 * pass could let a larger, lower-ranked item in early, in the place of smaller ones that the plain
 * form would have packed (on the dev set that lost evidence on some questions while gaining on
 * others).
 */
export const packContext = (ranked: readonly PackInput[], budget: number): Packed => {
  let used = countTokens(`${CONTEXT_HEADER}\n`);
  const chosen: { item: PackInput; tokens: number }[] = [];
  const covered = new Set<string>();
  const openGroups = new Set<string>();
  const sourcesOf = (item: PackInput): string[] => item.turnIds.map((t) => `${item.conversation}\u0000${t}`);
  const isCovered = (sources: readonly string[]): boolean => sources.length > 0 && sources.every((s) => covered.has(s));
  for (const item of ranked) {
    const sources = sourcesOf(item);
    if (isCovered(sources)) continue;
    const key = groupKey(item);
    const header = openGroups.has(key) ? 0 : countTokens(`${groupHeader(item)}\n`);
    const tokens = lineTokens(item, null);
    if (used + header + tokens > budget) continue;
    used += header + tokens;
    openGroups.add(key);
    for (const s of sources) covered.add(s);
    chosen.push({ item, tokens });
  }
  const layout = new Layout(chosen.map((c) => c.item));
  const taken = new Set(chosen.map((c) => c.item));
  for (const item of ranked) {
    if (taken.has(item)) continue;
    const sources = sourcesOf(item);
    if (isCovered(sources) || layout.tokensWith(item) > budget) continue;
    layout.add(item);
    for (const s of sources) covered.add(s);
    chosen.push({ item, tokens: lineTokens(item, null) });
  }
  // Line counts are upper bounds (a continued speaker drops its label), but joining can merge
  // tokens across a newline, so re-check the whole; the second pass's items go first.
  while (chosen.length > 0) {
    const context = render(chosen.map((c) => c.item));
    const tokens = countTokens(context);
    if (tokens <= budget) return { context, tokens, items: chosen.map((c) => toContextItem(c.item, c.tokens)) };
    chosen.pop();
  }
  return { context: "", tokens: 0, items: [] };
};
