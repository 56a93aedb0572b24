/** Names for the generated schema types (src/generated/openapi.ts) that the client's methods use. */
import type { components, operations } from "./generated/openapi.ts";

type Schemas = components["schemas"];

export type TurnInput = Schemas["TurnInput"];
export type IngestResult = Schemas["IngestResult"];
export type BatchResult = Schemas["BatchResult"];
export type RejectedTurn = Schemas["RejectedTurn"];
export type QueryRequest = Schemas["QueryRequest"];
export type QueryResult = Schemas["QueryResult"];
export type ContextItem = Schemas["ContextItem"];
export type MemoryRecord = Schemas["MemoryRecord"];
export type RecordType = Schemas["RecordType"];
export type RecordHistory = Schemas["RecordHistory"];
export type ConsolidationReport = Schemas["ConsolidationReport"];
export type ErasureReport = Schemas["ErasureReport"];
export type Readiness = Schemas["Readiness"];
export type ConversationPage = Schemas["ConversationPage"];
export type ConversationSummary = Schemas["ConversationSummary"];
export type Timeline = Schemas["Timeline"];

type ListQuery = NonNullable<operations["listRecords"]["parameters"]["query"]>;

/** Filters of a record listing (`GET /v1/records`); `includeSuperseded` may also be a boolean. */
export type RecordFilters = Omit<ListQuery, "cursor" | "includeSuperseded"> & {
  includeSuperseded?: boolean | ListQuery["includeSuperseded"];
};

/** One page of a record listing. */
export type RecordPage = operations["listRecords"]["responses"][200]["content"]["application/json"];
