/**
 * Migrations of keys stored in the older plain-joined format `tenant/conversation` to the
 * unambiguous one (services/core/keys.ts). Names without `/` or `%` in the tenant have the same key
 * in both formats and are left alone; the others are re-keyed when the row itself says which
 * tenant and conversation it belongs to. A key that stays ambiguous (two conversations of different
 * tenants shared it, so its state mixed both) is left as it is: it was already wrong, no migration
 * can split it.
 */
import { conversationKey } from "../../keys.ts";
import type { SqliteDatabase } from "../sqlite-db.ts";

const legacyKey = (tenant: string, conversation: string): string => `${tenant}/${conversation}`;

/** The tenant and conversation a JSON value names, when it names both (segmenter state, inbox entries, segments). */
const namedIn = (json: string): { tenant: string; conversation: string } | undefined => {
  try {
    const v = JSON.parse(json) as unknown;
    if (typeof v !== "object" || v === null) return undefined;
    const { tenant, conversation } = v as { tenant?: unknown; conversation?: unknown };
    return typeof tenant === "string" && typeof conversation === "string" ? { tenant, conversation } : undefined;
  } catch {
    return undefined;
  }
};

const tableExists = (db: SqliteDatabase, name: string): boolean =>
  db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM sqlite_master WHERE name = ?").get(name)?.n === 1;

/**
 * Stage state (embedded runtime): the key from the state's own tenant/conversation (segmenter), else
 * from the inbox's conversations whose old key it is (encoder state names neither), when exactly one.
 */
export const rekeyStageState = (db: SqliteDatabase): void => {
  const byLegacyKey = new Map<string, { tenant: string; conversation: string }[]>();
  if (tableExists(db, "inbox")) {
    const pairs = db
      .prepare<[], { tenant: string; conversation: string }>("SELECT DISTINCT tenant, conversation FROM inbox")
      .all();
    for (const p of pairs) {
      const k = legacyKey(p.tenant, p.conversation);
      byLegacyKey.set(k, [...(byLegacyKey.get(k) ?? []), p]);
    }
  }
  const rows = db
    .prepare<[], { stage: string; key: string; json: string }>("SELECT stage, key, json FROM stage_state")
    .all();
  const move = db.prepare<[string, string, string]>(
    "UPDATE OR IGNORE stage_state SET key = ? WHERE stage = ? AND key = ?",
  );
  for (const row of rows) {
    const own = namedIn(row.json);
    const candidates = own && legacyKey(own.tenant, own.conversation) === row.key ? [own] : byLegacyKey.get(row.key);
    if (candidates?.length !== 1) continue;
    const { tenant, conversation } = candidates[0] as { tenant: string; conversation: string };
    const key = conversationKey(tenant, conversation);
    if (key !== row.key) move.run(key, row.stage, row.key);
  }
};

/** Dead letters: key and tenant from the payload (an inbox entry or a segment) when it names them. */
export const rekeyDeadLetters = (db: SqliteDatabase): void => {
  const rows = db
    .prepare<[], { seq: number; key: string; payload: string }>("SELECT seq, key, payload FROM dead_letters")
    .all();
  const update = db.prepare<[string, string, number]>(
    "UPDATE OR IGNORE dead_letters SET key = ?, tenant = ? WHERE seq = ?",
  );
  for (const row of rows) {
    const own = namedIn(row.payload);
    if (!own || legacyKey(own.tenant, own.conversation) !== row.key) continue;
    const key = conversationKey(own.tenant, own.conversation);
    if (key !== row.key) update.run(key, own.tenant, row.seq);
  }
};
