/**
 * The client-streaming Ingest of one authenticated caller: every streamed turn is validated on its
 * own; consecutive valid turns of one conversation go to the service together (at most
 * INGEST_CHUNK at a time), in stream order, while the stream is still being read; invalid turns and
 * turn-id conflicts come back in the summary by their index in the stream. The stream as a whole
 * fails when it is empty, when no turn was accepted, or when the service fails.
 */
import type { ServerReadableStream } from "@grpc/grpc-js";
import { ConflictError, conflictMessage } from "../../core/errors.ts";
import { ingestAroundConflicts } from "../../core/ingest-conflicts.ts";
import type { MemoryService } from "../../core/memory-service.ts";
import type { TurnInput } from "../../core/requests.ts";
import type { IngestRequest, IngestSummary } from "./generated/memory.ts";
import { parseIngestRequest } from "./request-parsing.ts";
import { InvalidArgument, ResourceExhausted } from "./status-mapping.ts";

/** Most turns one Ingest stream may carry. */
export const MAX_STREAM_TURNS = 100_000;
/** Turns of one conversation handed to the service at a time while a stream is read. */
export const INGEST_CHUNK = 200;

export type StreamLog = (level: "warn", msg: string, fields?: Record<string, unknown>) => void;

/**
 * Reads the stream for `tenant`: resolves with the summary, rejects with why the stream fails as a
 * whole (InvalidArgument, ConflictError, ResourceExhausted, or the service's error). Never settles
 * when the stream itself breaks (the client cancelled): there is nobody left to answer.
 */
export const readIngestStream = (
  service: Pick<MemoryService, "ingest">,
  tenant: string,
  call: ServerReadableStream<IngestRequest, IngestSummary>,
  log?: StreamLog,
): Promise<IngestSummary> =>
  new Promise((resolve, reject) => {
    const summary: IngestSummary = { accepted: 0, turn_ids: [], rejected: [] };
    let pending: { conversation: string; turns: TurnInput[]; indices: number[] } | undefined;
    const conflictIds: string[] = [];
    let chain: Promise<void> = Promise.resolve();
    let failed: unknown;
    let index = 0;
    let finished = false;

    // Consecutive turns of one conversation go to the service together, in stream order.
    const dispatch = (): void => {
      const batch = pending;
      pending = undefined;
      if (!batch) return;
      chain = chain.then(async () => {
        if (failed !== undefined) return;
        try {
          // A turn whose id exists with other content is rejected (ALREADY_EXISTS in words); the others go in.
          const r = await ingestAroundConflicts(service, tenant, batch.conversation, batch.turns);
          summary.accepted += r.accepted;
          summary.turn_ids.push(...r.turnIds);
          for (const x of r.conflicts) {
            conflictIds.push(x.turnId);
            summary.rejected.push({
              index: batch.indices[x.index] ?? -1,
              turn_id: x.turnId,
              issues: [{ path: "turn_id", message: conflictMessage(x.turnId) }],
            });
          }
        } catch (err) {
          failed = err;
        }
      });
    };
    const fail = (err: unknown): void => {
      if (finished) return;
      finished = true;
      reject(err);
    };
    const succeed = (): void => {
      if (finished) return;
      finished = true;
      resolve(summary);
    };

    call.on("data", (m: IngestRequest) => {
      if (finished) return;
      const i = index++;
      if (i >= MAX_STREAM_TURNS) {
        fail(new ResourceExhausted(`a stream carries at most ${MAX_STREAM_TURNS} turns`));
        return;
      }
      const parsed = parseIngestRequest(m);
      if (!parsed.ok) {
        summary.rejected.push({ index: i, turn_id: parsed.turnId ?? "", issues: parsed.issues });
        return;
      }
      if (pending && pending.conversation !== parsed.conversation) dispatch();
      pending ??= { conversation: parsed.conversation, turns: [], indices: [] };
      pending.turns.push(parsed.turn);
      pending.indices.push(i);
      if (pending.turns.length >= INGEST_CHUNK) dispatch();
    });
    call.on("error", (err) => {
      log?.("warn", "Ingest stream failed", { error: String(err) });
      finished = true;
    });
    call.on("end", () => {
      dispatch();
      void chain.then(() => {
        if (failed !== undefined) return fail(failed);
        if (index === 0) return fail(new InvalidArgument("no turns in the stream", []));
        summary.rejected.sort((a, b) => a.index - b.index);
        if (summary.accepted === 0 && conflictIds.length > 0)
          return fail(new ConflictError(conflictIds.map((turnId, index) => ({ index, turnId }))));
        if (summary.accepted === 0) {
          const issues = summary.rejected.flatMap((r) =>
            r.issues.map((x) => ({ ...x, path: `turns.${r.index}.${x.path}` })),
          );
          return fail(new InvalidArgument("no valid turns", issues));
        }
        succeed();
      });
    });
  });
