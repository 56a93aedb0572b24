/**
 * The MCP front door (issue 16): the memory service's contracts (MemoryService, MemoryMaintenance)
 * as MCP tools for agents. One McpServer serves one tenant: the stdio command fixes it when it
 * starts, the HTTP mount builds a server per request for the tenant of the request's API key. Like
 * the HTTP and gRPC doors it parses with the shared zod schemas (services/core/requests.ts), so a
 * value one door accepts is accepted by all of them.
 *
 * Errors: an argument the schema refuses comes back from the SDK as a tool error (isError) whose
 * text names the field ("... at turns[0].speaker"); the handlers' own checks, the service's ValidationError / ConflictError
 * come back the same way with their field paths; anything else is "internal error" (the detail goes
 * to the log, not to the agent).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { isMemoryMaintenance } from "../consolidator/types.ts";
import { conflictMessage, isConflictError, issuesFromZod, isValidationError } from "../core/errors.ts";
import { ingestAroundConflicts } from "../core/ingest-conflicts.ts";
import { idSchema, timeFilterSchema } from "../core/input-rules.ts";
import type { MaintenanceOffer, MemoryMaintenance } from "../core/maintenance.ts";
import type { MemoryService } from "../core/memory-service.ts";
import type { QueryResult } from "../core/query-types.ts";
import { QueryRequestSchema, recordListingSchema, TurnInputSchema } from "../core/requests.ts";
import { RecordTypeSchema } from "../core/types.ts";

/** Most turns one `remember` call may carry: the HTTP batch route's limit. */
export const MAX_REMEMBER_TURNS = 1000;

export const MCP_SERVER_NAME = "streaming-memory";
export const MCP_SERVER_VERSION = "0.1.0";

export interface McpServerDeps {
  service: MemoryService;
  /** The tenant every tool call acts for (resolved from the caller's credential, never an argument). */
  tenant: string;
  /** Consolidation, history, erasure (default: the service itself when it offers them). */
  maintenance?: MemoryMaintenance;
  /** Where failures that are not the caller's fault are reported (their text is not sent to the agent). */
  onInternalError?: (err: unknown, tool: string) => void;
}

/** A tool error the agent can act on: one line per field at fault. */
const toolError = (message: string, issues: readonly { path: string; message: string }[] = []): CallToolResult => ({
  isError: true,
  content: [
    {
      type: "text",
      text: [message, ...issues.map((i) => `${i.path === "" ? "(input)" : i.path}: ${i.message}`)].join("\n"),
    },
  ],
});

const jsonResult = (value: object, text?: string): CallToolResult => ({
  content: [{ type: "text", text: text ?? JSON.stringify(value, null, 2) }],
  structuredContent: value as Record<string, unknown>,
});

/** The packed context, then one line per source: what an agent pastes into its prompt and cites. */
const recallText = (r: QueryResult): string => {
  if (r.items.length === 0) return "(no memories found)";
  const sources = r.items.map(
    (it, i) =>
      `[${i + 1}] ${it.kind} ${it.id} · ${it.dateTo ? `${it.date} to ${it.dateTo}` : it.date} · conversation ${it.conversation} · turns ${it.turnIds.join(", ") || "-"}`,
  );
  return `${r.context}\n\nSources (${r.contextTokens}/${r.budget} tokens):\n${sources.join("\n")}`;
};

// Input shapes. Tools take the shared schemas where they have no transform that changes the type
// (the SDK publishes their input side as JSON Schema); the listing filters are re-parsed below by
// the shared recordListingSchema, which turns ISO dates into the store's milliseconds.
const rememberShape = {
  conversation: idSchema().describe("Conversation id the turns belong to (your session or thread id)."),
  turns: z
    .array(TurnInputSchema)
    .min(1)
    .max(MAX_REMEMBER_TURNS)
    .describe(
      "Turns in the order they were said: speaker, text, ISO 8601 timestamp with an offset; role, turnId, sessionId, metadata optional.",
    ),
  endOfSession: z
    .boolean()
    .optional()
    .describe(
      "True when the conversation (or session) ends here: closes its open segment so that what it holds is indexed without waiting for more turns.",
    ),
};

const recallShape = {
  question: QueryRequestSchema.shape.question.describe("What to remember, as a question in plain words."),
  conversation: idSchema().optional().describe("Only this conversation (default: all of the tenant's)."),
  budget: QueryRequestSchema.shape.budget.describe("Token budget of the packed context (50-32000, default 1000)."),
  asOf: timeFilterSchema()
    .optional()
    .describe("ISO 8601 date or date-time: answer as of then (records that were valid at that moment)."),
};

const listShape = {
  conversation: idSchema().optional().describe("Only records of this conversation."),
  entity: idSchema().optional().describe("Only records mentioning this entity (e.g. a person's name)."),
  type: RecordTypeSchema.optional().describe("Only records of this type."),
  from: timeFilterSchema().optional().describe("ISO 8601 date or date-time: records dated at or after."),
  to: timeFilterSchema().optional().describe("ISO 8601 date or date-time: records dated at or before."),
  limit: z.number().int().min(1).max(200).optional().describe("Page size, 1-200 (default 50)."),
  cursor: z.string().min(1).max(4096).optional().describe("nextCursor of the previous page."),
  includeSuperseded: z.boolean().optional().describe("Include superseded versions (default: current ones only)."),
};

const ListingSchema = recordListingSchema(z.number().int().min(1).max(200).default(50), z.boolean().optional());

const recordIdShape = { id: idSchema().describe("Record id (from recall sources or list_memories).") };

const forgetShape = {
  conversation: idSchema().describe("Conversation to erase: its turns, records and vectors."),
  confirm: z
    .string()
    .describe(
      "Must repeat the conversation id exactly: erasure cannot be undone, so a slip of the agent does nothing.",
    ),
};

/** The seven memory tools, bound to one tenant. */
export const createMemoryMcpServer = (deps: McpServerDeps): McpServer => {
  const { service, tenant } = deps;
  const offered = (service as MaintenanceOffer).offersMaintenance !== false;
  const maintenance = deps.maintenance ?? (offered && isMemoryMaintenance(service) ? service : undefined);
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: MCP_SERVER_VERSION },
    {
      instructions:
        "Long-term memory of conversations. Call `remember` with the turns of a conversation as they happen, `recall` with a question to get a packed, dated context with its sources; `list_memories`, `get_memory` and `memory_history` show what is stored; `forget` erases a conversation.",
    },
  );

  /** Runs a tool body, turning the service's client errors into tool errors naming their fields. */
  const guarded =
    <A>(tool: string, body: (args: A) => Promise<CallToolResult>) =>
    async (args: A): Promise<CallToolResult> => {
      try {
        return await body(args);
      } catch (err) {
        if (isValidationError(err)) return toolError(err.message, err.issues);
        if (isConflictError(err))
          return toolError(
            err.message,
            err.conflicts.map((c) => ({ path: `turns.${c.index}.turnId`, message: conflictMessage(c.turnId) })),
          );
        deps.onInternalError?.(err, tool);
        return toolError(`internal error in ${tool}`);
      }
    };

  const unsupported = (tool: string): CallToolResult =>
    toolError(`${tool} is not supported by this runtime (no consolidation, history or erasure)`);

  server.registerTool(
    "remember",
    {
      title: "Remember conversation turns",
      description:
        "Store one or more turns of a conversation in long-term memory. Turns are segmented, compressed and indexed in the background; set endOfSession when the conversation ends so the last segment is indexed now. A turn whose turnId already exists with other content is reported, the others are stored.",
      inputSchema: rememberShape,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    },
    guarded("remember", async ({ conversation, turns, endOfSession }) => {
      const result = await ingestAroundConflicts(service, tenant, conversation, turns);
      if (endOfSession) await service.flush(tenant, conversation);
      const rejected = result.conflicts.map((c) => ({
        index: c.index,
        turnId: c.turnId,
        issues: [{ path: `turns.${c.index}.turnId`, message: conflictMessage(c.turnId) }],
      }));
      const value = { conversation, accepted: result.accepted, turnIds: result.turnIds, rejected };
      if (result.accepted === 0 && rejected.length > 0)
        return toolError(
          "no turns stored: turn ids in conflict",
          rejected.flatMap((r) => r.issues),
        );
      return jsonResult(value);
    }),
  );

  server.registerTool(
    "recall",
    {
      title: "Recall memories",
      description:
        "Answer a question from long-term memory: returns a packed, dated context that fits the token budget, followed by its sources (record or turn ids, dates, conversations). Use asOf to ask about the past.",
      inputSchema: recallShape,
      annotations: { readOnlyHint: true },
    },
    guarded("recall", async (args) => {
      const parsed = QueryRequestSchema.safeParse(args);
      if (!parsed.success) return toolError("invalid recall arguments", issuesFromZod(parsed.error));
      const result = await service.query(tenant, parsed.data);
      return jsonResult(result, recallText(result));
    }),
  );

  server.registerTool(
    "list_memories",
    {
      title: "List memories",
      description:
        "List stored memory records (facts, events, preferences, plans, relations), newest first, filtered by conversation, entity, type or date range. Pass nextCursor back as cursor for the next page.",
      inputSchema: listShape,
      annotations: { readOnlyHint: true },
    },
    guarded("list_memories", async (args) => {
      const parsed = ListingSchema.safeParse(args);
      if (!parsed.success) return toolError("invalid list_memories arguments", issuesFromZod(parsed.error));
      const page = await service.listRecords(tenant, parsed.data);
      return jsonResult({ records: page.records, nextCursor: page.nextCursor ?? null });
    }),
  );

  server.registerTool(
    "get_memory",
    {
      title: "Get one memory",
      description: "One memory record by id: its text, type, entities, dates, validity and source turns.",
      inputSchema: recordIdShape,
      annotations: { readOnlyHint: true },
    },
    guarded("get_memory", async ({ id }) => {
      const record = await service.getRecord(tenant, id);
      if (!record) return toolError("record not found", [{ path: "id", message: `no record ${JSON.stringify(id)}` }]);
      return jsonResult(record);
    }),
  );

  server.registerTool(
    "memory_history",
    {
      title: "Memory history",
      description:
        "The versions of a memory record: what it superseded or was superseded by, duplicates merged into it, refinements, and when each version was valid.",
      inputSchema: recordIdShape,
      annotations: { readOnlyHint: true },
    },
    guarded("memory_history", async ({ id }) => {
      if (!maintenance) return unsupported("memory_history");
      const history = await maintenance.history(tenant, id);
      if (!history) return toolError("record not found", [{ path: "id", message: `no record ${JSON.stringify(id)}` }]);
      return jsonResult(history);
    }),
  );

  server.registerTool(
    "forget",
    {
      title: "Forget a conversation",
      description:
        "Erase one conversation from memory for good: its turns, records and vectors. Needs confirm equal to the conversation id.",
      inputSchema: forgetShape,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    },
    guarded("forget", async ({ conversation, confirm }) => {
      if (confirm !== conversation)
        return toolError("not erased: confirmation does not match", [
          { path: "confirm", message: "must equal the conversation id" },
        ]);
      if (!maintenance) return unsupported("forget");
      return jsonResult(await maintenance.erase(tenant, conversation));
    }),
  );

  server.registerTool(
    "consolidate",
    {
      title: "Consolidate memory",
      description:
        "Run consolidation now for this tenant: merge duplicate records, mark contradicted ones superseded, link refinements. Returns what it did.",
      inputSchema: {},
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    },
    guarded("consolidate", async () => {
      if (!maintenance) return unsupported("consolidate");
      return jsonResult(await maintenance.consolidate(tenant));
    }),
  );

  return server;
};
