// A context carries a record's evidence as the record itself or as its raw turn (never both: the
// packing keeps whichever ranks first), so tests match evidence by either.
import type { ContextItem } from "../../services/core/query-types.ts";
import type { MemoryRecord } from "../../services/core/types.ts";

/** The item is the record, or the raw turn (or turns) it was said in. */
export const standsFor = (item: ContextItem, record: MemoryRecord): boolean =>
  item.id === record.id || (item.kind === "turn" && record.source.turnIds.every((t) => item.turnIds.includes(t)));

/** Some item carries the record's evidence. */
export const carries = (items: readonly ContextItem[], record: MemoryRecord): boolean =>
  items.some((i) => standsFor(i, record));
