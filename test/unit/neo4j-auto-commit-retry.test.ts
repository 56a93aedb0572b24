import assert from "node:assert/strict";
import { test } from "node:test";
import neo4j from "neo4j-driver";
import { runAutoCommitRetrying } from "../../services/core/adapters/neo4j/driver.ts";

const deadlock = (): Error =>
  new neo4j.Neo4jError("deadlock", "Neo.TransientError.Transaction.DeadlockDetected", "50N00", "deadlock");
const syntax = (): Error => new neo4j.Neo4jError("bad", "Neo.ClientError.Statement.SyntaxError", "42001", "syntax");

/** A session whose first `failures` runs throw what `error` makes. */
const flakySession = (failures: number, error: () => Error) => {
  const calls: { cypher: string; params?: Record<string, unknown> }[] = [];
  return {
    calls,
    async run(cypher: string, params?: Record<string, unknown>): Promise<unknown> {
      calls.push({ cypher, ...(params ? { params } : {}) });
      if (calls.length <= failures) throw error();
      return {};
    },
  };
};

test("an auto-commit erase that deadlocks is run again until it succeeds, with the same statement", async () => {
  const session = flakySession(2, deadlock);
  await runAutoCommitRetrying(session, "MATCH (n {tenant: $tenant}) DETACH DELETE n", { tenant: "acme/eu" });
  assert.equal(session.calls.length, 3);
  for (const call of session.calls) assert.deepEqual(call.params, { tenant: "acme/eu" });
});

test("a non-transient failure is not retried", async () => {
  const session = flakySession(1, syntax);
  await assert.rejects(runAutoCommitRetrying(session, "BAD"), /bad/);
  assert.equal(session.calls.length, 1);
});

test("a transient failure that persists surfaces after five attempts", async () => {
  const session = flakySession(100, deadlock);
  await assert.rejects(runAutoCommitRetrying(session, "MATCH (n) RETURN n"), /deadlock/);
  assert.equal(session.calls.length, 5);
});
