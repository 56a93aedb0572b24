/**
 * The erasure rule lives in services/core/erasure.ts, where every stage may import it (the
 * distributed indexer runs it again when an erase control reaches it); re-exported here for the
 * consolidator's callers.
 */
export { eraseConversation, eraseTenant, erasureWrites } from "../core/erasure.ts";
