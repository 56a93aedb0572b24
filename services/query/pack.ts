import type { ContextItem } from "../core/query-types.ts";
import { daySpanWording } from "../core/text/day-span.ts";
import { recordParts, withoutSaidDay } from "../core/text/record-text.ts";
import { wordCount } from "../core/text/words.ts";
import { countTokens } from "../core/tokens.ts";
import { citation, type IdStart, idStart, prefixNote, prefixOf } from "./cite.ts";
import { opensWithName } from "./record-line.ts";

export const CONTEXT_HEADER = "Memories (dated, sourced; newer facts override older):";

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

/** Items said in one session on one day share one header. */
const groupKey = (item: PackInput): string =>
  `${item.conversation}\u0000${item.session ?? ""}\u0000${day(saidAtOf(item))}`;

/**
 * "2023-05-08:", with the conversation when the context header does not name it ("2023-05-08
 * conv-26:") and " (D3:…)" before the colon when its lines cite under that prefix ("[…5]"). The
 * session's name is not written: the day is what a reader places a line by, and the citations
 * (whole ids, or the prefix note) already say which session a line is from.
 */
const groupHeader = (item: PackInput, named = true, prefix = ""): string =>
  `${day(saidAtOf(item))}${named ? ` ${item.conversation}` : ""}${prefix ? prefixNote(prefix) : ""}:`;

/**
 * An item's sources: "[D3:5-6]", or "[…5-6]" under a header giving the prefix "D3:". With prefix
 * null every id is written whole, one by one ("[D3:5,D3:6]"): the longest form, which the first
 * packing pass prices every line at.
 */
const cite = (item: PackInput, prefix: string | null): string =>
  prefix === null ? `[${item.turnIds.join(",")}]` : citation(item.turnIds, prefix);

/**
 * A statement of at least this many words reads alone: its record's line leaves out the quoted
 * question it answers. The quote is there for answers such as "Yes!" or "For running.", which mean
 * nothing without it; a longer statement says what it is about (the encoder resolved its pronouns
 * and dates), and the quotes cost 8% of a context's tokens. Such a line no longer carries the
 * asker's turn, so it no longer cites it either (`asShown`).
 */
export const STANDS_ALONE_WORDS = 12;

const readsAlone = (statement: string): boolean => wordCount(statement) >= STANDS_ALONE_WORDS;

/**
 * The item as its line shows it. A record whose line leaves out the question it answers no longer
 * carries the asker's turn: its sources are its statement's turn alone (the encoder's sources for
 * such a record are the asker's turn, then the statement's). Its citation, the turns it covers
 * and the item returned say so, and the asker's turn stays free to be packed for its own words.
 */
export const asShown = (item: PackInput): PackInput => {
  const statement = quotingStatement(item);
  return statement !== undefined && readsAlone(statement) ? statementTurnOnly(item) : item;
};

/**
 * The statement of a record whose line quotes the question it answers (the encoder's second form,
 * said on its header's day, with the asker's turn among its sources), else undefined.
 */
const quotingStatement = (item: PackInput): string | undefined => {
  if (item.kind === "turn" || item.turnIds.length < 2) return undefined;
  const parts = recordParts(item.text);
  return parts.asked && parts.day === day(saidAtOf(item)) ? parts.statement : undefined;
};

/** The record citing its statement's turn alone (the encoder lists the asker's turn first). */
const statementTurnOnly = (item: PackInput): PackInput => ({ ...item, turnIds: item.turnIds.slice(-1) });

/** Records shown without their quoted question, its turn being in the context already. */
const quoteless = new WeakSet<PackInput>();

/**
 * A record's line without its sources: "Ana: <statement>", or "Ana, asked by Ben "<question>":
 * <statement>" for a short answer. Nothing the header says is repeated: the record's own day of
 * saying is left out when it is the header's, and its event date leads the line in parentheses
 * only when it differs from that day and the statement does not give it. The speaker's label is
 * left out when the statement opens with the speaker's name ("Ana went …"). A text in another
 * form (an LLM encoder's record) is written as it is.
 */
const recordBody = (item: PackInput): string => {
  const saidDay = day(saidAtOf(item));
  const parts = recordParts(item.text);
  const event = eventWording(item);
  const dated = event !== saidDay && !givesEventTime(parts.statement, item, event) ? `(${event}) ` : "";
  if (parts.speaker === undefined || parts.day !== saidDay) return `${dated}${withoutSaidDay(item.text, saidDay)}`;
  const asked = parts.asked && !readsAlone(parts.statement) && !quoteless.has(item) ? parts.asked : undefined;
  const label = asked
    ? `${parts.speaker}, asked by ${asked.speaker} "${asked.question}": `
    : opensWithName(parts.statement, parts.speaker)
      ? ""
      : `${parts.speaker}: `;
  return `${dated}${label}${parts.statement}`;
};

/**
 * A record's event time as the encoder words it ("2023-05-07", "June 2023", "2022", "the week of
 * 2023-02-20"), which is also how its statement gives it when the date is its own.
 */
const eventWording = (item: PackInput): string => {
  const first = day(item.date);
  return item.dateTo === undefined ? first : daySpanWording(first, day(item.dateTo));
};

/**
 * Whether a statement already gives its record's event time: in the same words ("The week of
 * 2023-06-26 was wild"), or both of its days ("the opening on 2023-06-19 moved to 2023-06-20").
 */
const givesEventTime = (statement: string, item: PackInput, wording: string): boolean => {
  if (statement.toLowerCase().includes(wording.toLowerCase())) return true;
  return item.dateTo !== undefined && statement.includes(day(item.date)) && statement.includes(day(item.dateTo));
};

/** An item's line without its sources. */
const lineBody = (item: PackInput, previous?: PackInput): string => {
  if (item.kind !== "turn") return recordBody(item);
  const speaker = item.speakers[0] ?? "";
  const continues = previous?.kind === "turn" && previous.speakers[0] === speaker;
  return `${continues || speaker === "" ? "  " : `${speaker}: `}${item.text}`;
};

/**
 * One item's line under its header: "Speaker: text [D1:3]" for a raw turn, its label left out when
 * the line above is a turn by the same speaker; a record's line (`recordBody`) reads the same, so
 * that no marker tells the two apart (a reader needs what was said, not how it was stored). A
 * record's own prefix day ("Ana (2023-05-08): ...") is left out: it is the day its header gives,
 * and repeating it cost about 7 of a record's ~57 tokens, budget that now packs further items.
 */
export const renderItem = (item: PackInput, previous?: PackInput, prefix: string | null = ""): string =>
  `${lineBody(item, previous)} ${cite(item, prefix)}`;

export interface Packed {
  context: string;
  tokens: number;
  items: ContextItem[];
}

/**
 * Token counts of lines and headers, kept for one packing: the second pass re-counts a group for
 * every candidate that would join it, and the render counts again what the passes chose.
 */
class Counts {
  private readonly bodies = new Map<PackInput, number>();
  private readonly lines = new Map<PackInput, Map<string | null, number>>();
  private readonly headers = new Map<PackInput, Map<string, number>>();
  private readonly contexts = new Map<string, number>();

  /**
   * A line with its newline, counted as if it continued no speaker (an upper bound): its body and
   * its " [sources]\n" apart, which is exact, as o200k's pre-tokenizer always cuts before " [".
   * Only the short tail is counted again for each way of citing.
   */
  line(item: PackInput, prefix: string | null): number {
    let forms = this.lines.get(item);
    if (!forms) {
      forms = new Map();
      this.lines.set(item, forms);
    }
    let n = forms.get(prefix);
    if (n === undefined) {
      n = this.body(item) + countTokens(` ${cite(item, prefix)}\n`);
      forms.set(prefix, n);
    }
    return n;
  }

  /** A line without its sources, with its speaker label. */
  body(item: PackInput): number {
    let n = this.bodies.get(item);
    if (n === undefined) {
      // From the whole line with plain ids, which the first pass counts anyway: one long text
      // counted per item, not two.
      const tail = countTokens(` ${cite(item, null)}\n`);
      n = countTokens(`${lineBody(item)} ${cite(item, null)}\n`) - tail;
      this.bodies.set(item, n);
    }
    return n;
  }

  /** The header of the group `head` opens, with its newline. */
  header(head: PackInput, named: boolean, prefix = ""): number {
    let forms = this.headers.get(head);
    if (!forms) {
      forms = new Map();
      this.headers.set(head, forms);
    }
    const key = `${named ? "+" : "-"}${prefix}`;
    let n = forms.get(key);
    if (n === undefined) {
      n = countTokens(`${groupHeader(head, named, prefix)}\n`);
      forms.set(key, n);
    }
    return n;
  }

  /** The context header, naming the conversation when given, with its newline. */
  context(conversation?: string): number {
    const key = conversation ?? "";
    let n = this.contexts.get(key);
    if (n === undefined) {
      n = countTokens(`${contextHeader(conversation)}\n`);
      this.contexts.set(key, n);
    }
    return n;
  }
}

/**
 * A group as it is counted: its lines' sum with whole ids and with the ids' shared prefix said
 * once, and the cheaper form's tokens with the conversation named in its header and without. A
 * group cites under the prefix only where the header's " (D3:…)" costs less than the prefix
 * repeated on every line (one line seldom pays for it, three usually do).
 */
interface Group {
  items: readonly PackInput[];
  start: IdStart | undefined;
  prefix: string;
  whole: number;
  factored: number;
  named: number;
  unnamed: number;
}

/** `group` (undefined: none yet) with `item` added; the old lines are re-counted only when the prefix changes. */
const grow = (group: Group | undefined, item: PackInput, counts: Counts): Group => {
  const items = group ? [...group.items, item] : [item];
  const start = idStart(item.turnIds, group?.start);
  const prefix = prefixOf(start);
  const whole = (group?.whole ?? 0) + counts.line(item, "");
  let factored = 0;
  if (prefix !== "")
    if (group && prefix === group.prefix) factored = group.factored + counts.line(item, prefix);
    else for (const i of items) factored += counts.line(i, prefix);
  const head = items[0] as PackInput;
  const cheaper = (named: boolean): number => {
    const plain = counts.header(head, named) + whole;
    return prefix === "" ? plain : Math.min(plain, counts.header(head, named, prefix) + factored);
  };
  return { items, start, prefix, whole, factored, named: cheaper(true), unnamed: cheaper(false) };
};

/** The prefix a group's lines cite under, with or without the conversation in its header; "" for whole ids. */
const citedPrefix = (group: Group, named: boolean, counts: Counts): string => {
  if (group.prefix === "") return "";
  const head = group.items[0] as PackInput;
  const plain = counts.header(head, named) + group.whole;
  return counts.header(head, named, group.prefix) + group.factored < plain ? group.prefix : "";
};

/**
 * The token count of a set of items as the context header plus each group's cheaper form (an
 * upper bound of the rendered text, lines being counted with their speaker labels), kept per group
 * so that trying one more item re-counts only its group. Both ways of naming the conversation are
 * kept: in every group header, or once in the context header when all items share it and that is
 * shorter.
 */
class Layout {
  readonly groups = new Map<string, Group>();
  private readonly conversations = new Set<string>();
  private named = 0;
  private unnamed = 0;

  constructor(
    private readonly counts: Counts,
    items: readonly PackInput[] = [],
  ) {
    for (const item of items) this.add(item);
  }

  /** The smaller total; naming the conversation once needs a single conversation. */
  private total(named: number, unnamed: number, conversations: number, only: string | undefined): number {
    const once =
      conversations === 1 && only !== undefined ? this.counts.context(only) + unnamed : Number.POSITIVE_INFINITY;
    return Math.min(this.counts.context() + named, once);
  }

  /** The conversation, when the context header names it instead of every group header. */
  get namedOnce(): string | undefined {
    const [only] = this.conversations;
    if (this.conversations.size !== 1 || only === undefined) return undefined;
    return this.counts.context(only) + this.unnamed < this.counts.context() + this.named ? only : undefined;
  }

  get tokens(): number {
    const [only] = this.conversations;
    return this.total(this.named, this.unnamed, this.conversations.size, only);
  }

  /** The count with `item` added; nothing changes. */
  tokensWith(item: PackInput): number {
    const before = this.groups.get(groupKey(item));
    const after = grow(before, item, this.counts);
    const [only] = this.conversations;
    return this.total(
      this.named - (before?.named ?? 0) + after.named,
      this.unnamed - (before?.unnamed ?? 0) + after.unnamed,
      this.conversations.size + (this.conversations.has(item.conversation) ? 0 : 1),
      only ?? item.conversation,
    );
  }

  add(item: PackInput): void {
    const key = groupKey(item);
    const before = this.groups.get(key);
    const after = grow(before, item, this.counts);
    this.named += after.named - (before?.named ?? 0);
    this.unnamed += after.unnamed - (before?.unnamed ?? 0);
    this.groups.set(key, after);
    this.conversations.add(item.conversation);
  }
}

const byHistory = (a: PackInput, b: PackInput): number =>
  saidAtOf(a).localeCompare(saidAtOf(b)) || a.date.localeCompare(b.date) || a.id.localeCompare(b.id);

/** The chosen items as the context: groups oldest first, items in the order they were said. */
const render = (chosen: readonly PackInput[], counts: Counts): string => {
  const layout = new Layout(counts, [...chosen].sort(byHistory));
  const once = layout.namedOnce;
  const lines = [contextHeader(once)];
  for (const group of layout.groups.values()) {
    const prefix = citedPrefix(group, once === undefined, counts);
    lines.push(groupHeader(group.items[0] as PackInput, once === undefined, prefix));
    group.items.forEach((item, i) => {
      lines.push(renderItem(item, group.items[i - 1], prefix));
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
 * stands for it. A record answering a question whose turn is in the context already leaves out
 * its quote of that question and cites only its statement's turn. The packed items are rendered
 * grouped by session and day under one dated header, oldest first, which is how a reader follows
 * a history. Items are returned as shown: a record whose line left out its quoted question lists
 * its statement's turn alone among its `turnIds`, its text stays the stored one.
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
export const packContext = (rankedAsStored: readonly PackInput[], budget: number): Packed => {
  const ranked = rankedAsStored.map(asShown);
  const counts = new Counts();
  let used = counts.context();
  const chosen: { item: PackInput; tokens: number }[] = [];
  const taken = new Set<PackInput>();
  const covered = new Set<string>();
  const openGroups = new Set<string>();
  const sourcesOf = (item: PackInput): string[] => item.turnIds.map((t) => `${item.conversation}\u0000${t}`);
  const isCovered = (sources: readonly string[]): boolean => sources.length > 0 && sources.every((s) => covered.has(s));
  const unquoted = new Map<PackInput, PackInput>();
  const shownFor = (item: PackInput): PackInput => {
    if (item.kind === "turn" || item.turnIds.length < 2) return item;
    const asker = `${item.conversation}\u0000${item.turnIds[0]}`;
    if (!covered.has(asker)) return item;
    let copy = unquoted.get(item);
    if (copy === undefined) {
      if (quotingStatement(item) === undefined) return item;
      copy = statementTurnOnly(item);
      quoteless.add(copy);
      unquoted.set(item, copy);
    }
    return copy;
  };
  for (const original of ranked) {
    if (isCovered(sourcesOf(original))) continue;
    const item = shownFor(original);
    const sources = sourcesOf(item);
    const key = groupKey(item);
    const header = openGroups.has(key) ? 0 : counts.header(item, true);
    const tokens = counts.line(item, null);
    if (used + header + tokens > budget) continue;
    used += header + tokens;
    openGroups.add(key);
    for (const s of sources) covered.add(s);
    chosen.push({ item, tokens });
    taken.add(original);
  }
  const layout = new Layout(
    counts,
    chosen.map((c) => c.item),
  );
  for (const original of ranked) {
    if (taken.has(original)) continue;
    if (isCovered(sourcesOf(original))) continue;
    const item = shownFor(original);
    const sources = sourcesOf(item);
    // Most candidates are longer than what is left: their line's body alone tells (an item adds at
    // least that much, the other lines of its group not getting shorter by its joining).
    if (layout.tokens + counts.body(item) > budget || layout.tokensWith(item) > budget) continue;
    layout.add(item);
    for (const s of sources) covered.add(s);
    chosen.push({ item, tokens: counts.line(item, null) });
  }
  // Line counts are upper bounds (a continued speaker drops its label), but joining can merge
  // tokens across a newline, so re-check the whole; the second pass's items go first.
  while (chosen.length > 0) {
    const context = render(
      chosen.map((c) => c.item),
      counts,
    );
    const tokens = countTokens(context);
    if (tokens <= budget) return { context, tokens, items: chosen.map((c) => toContextItem(c.item, c.tokens)) };
    chosen.pop();
  }
  return { context: "", tokens: 0, items: [] };
};
