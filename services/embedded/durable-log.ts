import type Database from "better-sqlite3";
import { migrate } from "../core/adapters/sqlite-db.ts";
import { ConflictError, type TurnIdConflict } from "../core/errors.ts";
import { SERVER_TURN_ID_PREFIX, turnContent } from "../core/turn-ids.ts";
import type { Segment, Turn } from "../core/types.ts";
import { DURABLE_LOG_COMPONENT, DURABLE_LOG_MIGRATIONS } from "./durable-log-schema.ts";

export type InboxEntry =
  | { seq: number; kind: "turn"; tenant: string; conversation: string; turn: Turn }
  | { seq: number; kind: "flush"; tenant: string; conversation: string; reason: "session-end" | "idle" | "flush" };

/** A tenant whose inbox entries after `from` wait (an erasure of it past its drain). */
export interface InboxExclusion {
  tenant: string;
  from: number;
}

/** Work a stage started on: inbox or pending-segment seqs first..last, tried `attempts` times. */
export interface Attempt {
  first: number;
  last: number;
  attempts: number;
}

interface InboxRow {
  seq: number;
  tenant: string;
  conversation: string;
  kind: "turn" | "flush";
  json: string;
}

/**
 * The embedded runtime's two durable hand-off points, in the same SQLite file as the stores:
 * the inbox (accepted turns and control events, in arrival order) and the pending segments
 * (closed by the segmenter, not yet indexed). An accepted turn is on disk before ingest returns,
 * so a crash loses nothing; a turn id seen twice in a conversation is accepted once. Its tables
 * are created and changed by migrations (durable-log-schema.ts), like the stores' tables.
 */
export class DurableLog {
  constructor(private readonly db: Database.Database) {
    migrate(db, DURABLE_LOG_COMPONENT, DURABLE_LOG_MIGRATIONS);
  }

  /** Appends turns in one transaction; returns which were new (false = already in the inbox). */
  appendTurns(turns: readonly Turn[]): boolean[] {
    const insert = this.db.prepare(
      "INSERT OR IGNORE INTO inbox (tenant, conversation, kind, turn_id, json) VALUES (?, ?, 'turn', ?, ?)",
    );
    return this.db.transaction(() =>
      turns.map((t) => insert.run(t.tenant, t.conversation, t.turnId, JSON.stringify(t)).changes > 0),
    )();
  }

  /**
   * Ingest of one conversation's turns, in one transaction: the turns flagged in `assign` get the
   * next server ids of the conversation (`@<n>`, from its durable counter, skipping any id already
   * in the inbox); a turn whose id is already in the inbox (or earlier in the call) with other
   * content is a conflict, and then nothing is appended and ConflictError names every conflict.
   * The same id with the same content is an idempotent retry: accepted, stored once.
   */
  appendConversationTurns(
    tenant: string,
    conversation: string,
    turns: readonly Turn[],
    assign: readonly boolean[],
  ): Turn[] {
    const existing = this.db.prepare<[string, string, string], { json: string }>(
      "SELECT json FROM inbox WHERE tenant = ? AND conversation = ? AND turn_id = ?",
    );
    const lastAssigned = this.db.prepare<[string, string], { last: number }>(
      "SELECT last FROM turn_id_counters WHERE tenant = ? AND conversation = ?",
    );
    const saveCounter = this.db.prepare(
      `INSERT INTO turn_id_counters (tenant, conversation, last) VALUES (?, ?, ?)
       ON CONFLICT (tenant, conversation) DO UPDATE SET last = excluded.last`,
    );
    return this.db.transaction(() => {
      let last = lastAssigned.get(tenant, conversation)?.last ?? 0;
      const assigned = turns.map((t, i): Turn => {
        if (!assign[i]) return t;
        let id: string;
        do id = `${SERVER_TURN_ID_PREFIX}${++last}`;
        while (existing.get(tenant, conversation, id) !== undefined);
        return { ...t, turnId: id };
      });
      if (assign.some(Boolean)) saveCounter.run(tenant, conversation, last);
      const conflicts: TurnIdConflict[] = [];
      const inCall = new Map<string, string>();
      assigned.forEach((t, index) => {
        const content = turnContent(t);
        const row = existing.get(tenant, conversation, t.turnId);
        // The stored turn wins; without one, the first turn of the call with that id.
        const before = row ? turnContent(JSON.parse(row.json) as Turn) : inCall.get(t.turnId);
        if (before !== undefined && before !== content) conflicts.push({ index, turnId: t.turnId });
        else if (!inCall.has(t.turnId)) inCall.set(t.turnId, content);
      });
      if (conflicts.length > 0) throw new ConflictError(conflicts);
      this.appendTurns(assigned);
      return assigned;
    })();
  }

  appendFlush(tenant: string, conversation: string, reason: "session-end" | "idle" | "flush"): void {
    this.db
      .prepare("INSERT INTO inbox (tenant, conversation, kind, turn_id, json) VALUES (?, ?, 'flush', NULL, ?)")
      .run(tenant, conversation, JSON.stringify({ reason }));
  }

  /**
   * Up to `limit` entries after `afterSeq` not yet done (completeEntries), none after `upTo` (an
   * erasure's hold on every tenant) and none of an excluded tenant after its `from` (an erasure's
   * hold on its own tenant).
   */
  readInbox(
    afterSeq: number,
    limit: number,
    upTo = Number.MAX_SAFE_INTEGER,
    excluded: readonly InboxExclusion[] = [],
  ): InboxEntry[] {
    const exclusions = excluded.map(() => " AND NOT (tenant = ? AND seq > ?)").join("");
    const rows = this.db
      .prepare(
        `SELECT seq, tenant, conversation, kind, json FROM inbox WHERE seq > ? AND seq <= ?
         AND seq NOT IN (SELECT seq FROM inbox_done)${exclusions} ORDER BY seq LIMIT ?`,
      )
      .all(afterSeq, upTo, ...excluded.flatMap((e) => [e.tenant, e.from]), limit) as InboxRow[];
    return rows.map((r) =>
      r.kind === "turn"
        ? { seq: r.seq, kind: "turn", tenant: r.tenant, conversation: r.conversation, turn: JSON.parse(r.json) as Turn }
        : {
            seq: r.seq,
            kind: "flush",
            tenant: r.tenant,
            conversation: r.conversation,
            reason: (JSON.parse(r.json) as { reason: "session-end" | "idle" | "flush" }).reason,
          },
    );
  }

  lastInboxSeq(): number {
    return (this.db.prepare("SELECT COALESCE(MAX(seq), 0) AS s FROM inbox").get() as { s: number }).s;
  }

  conversations(tenant?: string): { tenant: string; conversation: string }[] {
    const sql = tenant
      ? "SELECT DISTINCT tenant, conversation FROM inbox WHERE tenant = ? ORDER BY tenant, conversation"
      : "SELECT DISTINCT tenant, conversation FROM inbox ORDER BY tenant, conversation";
    return this.db.prepare(sql).all(...(tenant ? [tenant] : [])) as { tenant: string; conversation: string }[];
  }

  cursor(name: string): number {
    const row = this.db.prepare("SELECT seq FROM runtime_cursor WHERE name = ?").get(name) as
      | { seq: number }
      | undefined;
    return row?.seq ?? 0;
  }

  setCursor(name: string, seq: number): void {
    this.db
      .prepare(
        "INSERT INTO runtime_cursor (name, seq) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET seq = excluded.seq",
      )
      .run(name, seq);
  }

  /**
   * Records the entries as processed and moves the cursor `name` past every entry it has done: to
   * just before the first later entry that is neither done nor deleted, or, when none is left, to
   * the last entry (or `floor`, an erasure's hold whose own entries the erasure deleted). Entries
   * processed ahead of the cursor (another tenant's, while an erasure holds its own) stay marked
   * until the cursor passes them, so a restart neither processes them again nor skips what lies
   * before them. One transaction: the marks and the cursor move together.
   */
  completeEntries(name: string, seqs: readonly number[], floor?: number): void {
    this.db.transaction(() => {
      const done = this.db.prepare("INSERT OR IGNORE INTO inbox_done (seq) VALUES (?)");
      for (const seq of seqs) done.run(seq);
      const cursor = this.cursor(name);
      const next = (
        this.db
          .prepare("SELECT MIN(seq) AS s FROM inbox WHERE seq > ? AND seq NOT IN (SELECT seq FROM inbox_done)")
          .get(cursor) as { s: number | null }
      ).s;
      const to = next === null ? Math.max(this.lastInboxSeq(), floor ?? 0) : next - 1;
      if (to > cursor) this.setCursor(name, to);
      this.db.prepare("DELETE FROM inbox_done WHERE seq <= ?").run(Math.max(to, cursor));
    })();
  }

  /**
   * The work a stage recorded as started under `name` and did not record as finished: what the
   * process was doing when it stopped (crash, kill, hang), or undefined.
   */
  inFlight(name: string): Attempt | undefined {
    return this.db.prepare("SELECT first, last, attempts FROM runtime_attempts WHERE name = ?").get(name) as
      | Attempt
      | undefined;
  }

  /**
   * Records, durably and before the work starts, that a stage starts on the seqs [first, last].
   * Returns the attempt count: one more than recorded when the same range is still in flight (the
   * previous try never finished), else 1. Counts survive restarts, so a poison entry that crashes
   * or hangs the process is recognised on the next run.
   */
  beginAttempt(name: string, first: number, last: number): number {
    return this.db.transaction(() => {
      const prev = this.inFlight(name);
      const attempts = prev && prev.first === first && prev.last === last ? prev.attempts + 1 : 1;
      this.db
        .prepare(
          `INSERT INTO runtime_attempts (name, first, last, attempts) VALUES (?, ?, ?, ?)
           ON CONFLICT(name) DO UPDATE SET first = excluded.first, last = excluded.last, attempts = excluded.attempts`,
        )
        .run(name, first, last, attempts);
      return attempts;
    })();
  }

  /** The work recorded under `name` finished (or was set aside). */
  endAttempt(name: string): void {
    this.db.prepare("DELETE FROM runtime_attempts WHERE name = ?").run(name);
  }

  /**
   * Idempotent: a segment replayed after a crash is the same segment (deterministic id). Returns the
   * segments still to be indexed, leaving out any that were indexed before.
   */
  addPending(segments: readonly Segment[]): { seq: number; segment: Segment }[] {
    const insert = this.db.prepare(
      "INSERT OR IGNORE INTO pending_segments (tenant, conversation, segment_id, json) VALUES (?, ?, ?, ?)",
    );
    const find = this.db.prepare("SELECT seq, done FROM pending_segments WHERE segment_id = ?");
    return this.db.transaction(() =>
      segments.flatMap((s) => {
        insert.run(s.tenant, s.conversation, s.id, JSON.stringify(s));
        const row = find.get(s.id) as { seq: number; done: number } | undefined;
        return row && row.done === 0 ? [{ seq: row.seq, segment: s }] : [];
      }),
    )();
  }

  pending(): { seq: number; segment: Segment }[] {
    const rows = this.db.prepare("SELECT seq, json FROM pending_segments WHERE done = 0 ORDER BY seq").all() as {
      seq: number;
      json: string;
    }[];
    return rows.map((r) => ({ seq: r.seq, segment: JSON.parse(r.json) as Segment }));
  }

  /**
   * Kept, not deleted: a segment the segmenter emits again on replay (its state was not yet saved
   * when the process died) must not be encoded a second time with a newer context.
   */
  markDone(seq: number): void {
    this.db.prepare("UPDATE pending_segments SET done = 1, json = '{}' WHERE seq = ?").run(seq);
  }

  pendingCount(): number {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM pending_segments WHERE done = 0").get() as { n: number }).n;
  }

  /**
   * Erasure: the tenant's inbox entries up to `upTo` (all without it) and pending segments, and
   * the turn-id counters (which name its conversations) of conversations with no turn after it.
   * Turns accepted after `upTo` (while the erasure ran) stay, with their counters: ids assigned
   * later go on from them, never again from @1. A flush after `upTo` with no turn of its
   * conversation before it would flush nothing, and only keep the conversation's name: it goes.
   * Returns how many inbox and pending rows went.
   */
  deleteTenant(tenant: string, upTo = Number.MAX_SAFE_INTEGER): number {
    return this.deleteScope("tenant = ?", [tenant], upTo);
  }

  /** Erasure of one conversation, as deleteTenant for a tenant. */
  deleteConversation(tenant: string, conversation: string, upTo = Number.MAX_SAFE_INTEGER): number {
    return this.deleteScope("tenant = ? AND conversation = ?", [tenant, conversation], upTo);
  }

  private deleteScope(where: string, params: string[], upTo: number): number {
    return this.db.transaction(() => {
      this.db
        .prepare(
          `DELETE FROM turn_id_counters WHERE ${where} AND NOT EXISTS (SELECT 1 FROM inbox i
           WHERE i.tenant = turn_id_counters.tenant AND i.conversation = turn_id_counters.conversation
           AND i.kind = 'turn' AND i.seq > ?)`,
        )
        .run(...params, upTo);
      const emptyFlushes = this.db
        .prepare(
          `DELETE FROM inbox WHERE ${where} AND kind = 'flush' AND seq > ? AND NOT EXISTS (SELECT 1 FROM inbox t
           WHERE t.tenant = inbox.tenant AND t.conversation = inbox.conversation
           AND t.kind = 'turn' AND t.seq > ? AND t.seq < inbox.seq)`,
        )
        .run(...params, upTo, upTo).changes;
      return (
        emptyFlushes +
        this.db.prepare(`DELETE FROM inbox WHERE ${where} AND seq <= ?`).run(...params, upTo).changes +
        this.db.prepare(`DELETE FROM pending_segments WHERE ${where}`).run(...params).changes
      );
    })();
  }
}
