// The one turn-validation rule set both writers use (services/core/turn-validation.ts): the embedded
// engine's inbox and the gateway's Kafka producer accept and refuse the same turns, with one message.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import { ValidationError } from "../../services/core/errors.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { RESERVED_TURN_ID_MESSAGE } from "../../services/core/turn-ids.ts";
import { validateTurns } from "../../services/core/turn-validation.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";

const input = (extra: Partial<TurnInput> = {}): TurnInput => ({
  speaker: "Ana",
  role: "user",
  text: "I planted tomatoes on Monday.",
  timestamp: "2024-05-06T12:15:00+02:00",
  sessionId: "s1",
  ...extra,
});

/** The ValidationError a call throws (fails the test when it does not throw one). */
const validationErrorOf = async (run: () => unknown): Promise<ValidationError> => {
  try {
    await run();
  } catch (err) {
    assert.ok(err instanceof ValidationError, `expected a ValidationError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a ValidationError, nothing was thrown");
};

describe("turn validation, shared by the embedded and the distributed writer", () => {
  it("completes each turn: tenant, conversation, the client id or an assigned one, UTC timestamp", () => {
    const assigned: number[] = [];
    const turns = validateTurns(
      "acme",
      "c1",
      [input({ turnId: "t1" }), input(), input({ metadata: { k: "v" } })],
      (i) => {
        assigned.push(i);
        return `@gen-${i}`;
      },
    );
    assert.deepEqual(assigned, [1, 2], "ids are assigned only where the client sent none, by index");
    assert.deepEqual(
      turns.map((t) => [t.tenant, t.conversation, t.turnId]),
      [
        ["acme", "c1", "t1"],
        ["acme", "c1", "@gen-1"],
        ["acme", "c1", "@gen-2"],
      ],
    );
    assert.equal(turns[0]?.timestamp, "2024-05-06T10:15:00.000Z");
    assert.equal(turns[0]?.sessionId, "s1");
    assert.equal(turns[0]?.role, "user");
    assert.deepEqual(turns[2]?.metadata, { k: "v" });
    assert.equal("metadata" in (turns[0] ?? {}), false, "no metadata key when none was sent");
  });

  it("refuses a client id in the reserved namespace, naming the turn's index", async () => {
    const err = await validationErrorOf(() =>
      validateTurns("acme", "c1", [input({ turnId: "ok" }), input({ turnId: "@1" })], () => "@x"),
    );
    assert.equal(err.message, `invalid turn at index 1: turnId: ${RESERVED_TURN_ID_MESSAGE}`);
    assert.deepEqual(err.issues, [{ path: "turns.1.turnId", message: RESERVED_TURN_ID_MESSAGE }]);
  });

  it("refuses a turn that bypassed the request schema, with the index and the fields", async () => {
    const err = await validationErrorOf(() =>
      validateTurns("acme", "c1", [input(), input({ timestamp: "last Monday", speaker: "" })], (i) => `@${i}`),
    );
    assert.match(err.message, /^invalid turn at index 1: /);
    assert.match(err.message, /speaker: /);
    assert.match(err.message, /timestamp: /);
    const paths = err.issues.map((i) => i.path).sort();
    assert.deepEqual(paths, ["speaker", "timestamp"]);
  });

  it("an empty batch is valid and assigns nothing", () => {
    assert.deepEqual(
      validateTurns("acme", "c1", [], () => assert.fail("no id to assign")),
      [],
    );
  });

  it("the embedded engine refuses exactly what validateTurns refuses, with the same error", async () => {
    const dir = mkdtempSync(join(tmpdir(), "turn-validation-"));
    const opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder() });
    try {
      for (const bad of [
        [input(), input({ turnId: "@7" })],
        [input({ timestamp: "2024-13-45T99:00:00Z" })],
        [input({ text: "" })],
      ]) {
        const shared = await validationErrorOf(() => validateTurns("acme", "c1", bad, () => "@"));
        const engine = await validationErrorOf(() => opened.engine.ingest("acme", "c1", bad));
        assert.equal(engine.message, shared.message);
        assert.deepEqual(engine.issues, shared.issues);
      }
      const ok = await opened.engine.ingest("acme", "c1", [input({ turnId: "t1" }), input()]);
      assert.deepEqual(ok, { accepted: 2, turnIds: ["t1", "@1"] });
    } finally {
      await opened.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
