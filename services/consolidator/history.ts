// The pure history building moved to core (the query service builds histories too); kept here as a
// re-export for the consolidator's own callers.
export { buildHistory } from "../core/history.ts";
