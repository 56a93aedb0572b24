import type { ContextItem } from "../core/query-types.ts";
import { countTokens } from "../core/tokens.ts";

export const CONTEXT_HEADER = "Memories (dated, with sources; newest facts override older ones):";

export const renderItem = (item: Omit<ContextItem, "tokens">): string => {
  const src = `${item.conversation} ${item.turnIds.join(",")}`;
  return `- [${item.date.slice(0, 10)}] ${item.text} (source: ${src})`;
};

export interface Packed {
  context: string;
  tokens: number;
  items: ContextItem[];
}

/**
 * Greedy packing in relevance order into a token budget counted with the real tokenizer; an item
 * that does not fit is skipped so a smaller later one may still go in. The packed items are then
 * rendered oldest first, which is how a reader follows a history.
 */
export const packContext = (ranked: readonly Omit<ContextItem, "tokens">[], budget: number): Packed => {
  const headerTokens = countTokens(`${CONTEXT_HEADER}\n`);
  let used = headerTokens;
  const chosen: ContextItem[] = [];
  for (const item of ranked) {
    const tokens = countTokens(`${renderItem(item)}\n`);
    if (used + tokens > budget) continue;
    used += tokens;
    chosen.push({ ...item, tokens });
  }
  // Line counts are exact per line; joining can merge tokens across a newline, so re-check the whole.
  while (chosen.length > 0) {
    const ordered = [...chosen].sort((a, b) => a.date.localeCompare(b.date) || a.id.localeCompare(b.id));
    const context = [CONTEXT_HEADER, ...ordered.map(renderItem)].join("\n");
    const tokens = countTokens(context);
    if (tokens <= budget) return { context, tokens, items: chosen };
    chosen.pop();
  }
  return { context: "", tokens: 0, items: [] };
};
