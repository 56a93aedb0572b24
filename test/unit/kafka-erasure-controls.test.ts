/**
 * The broker-free parts of erasure through the Kafka pipeline (issue 13): the erase control kinds
 * decode as controls; an erase-tenant key exists for every partition and hashes there with the
 * partitioner every producer uses; the runtime's dropMatching marks exactly the selected held and
 * changed keys deleted; erasedKeys parses keys instead of prefix-matching them.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Partitioners } from "kafkajs";
import {
  decodeStageInput,
  dropMatching,
  outputMessages,
} from "../../services/core/adapters/kafka/stage-runtime-parts.ts";
import {
  CONTROL_HEADER,
  ERASED_IDS_HEADER,
  erasedKeys,
  eraseTenantKeys,
  eraseTenantShare,
  isControlKind,
  isErasure,
  partitionOfKey,
} from "../../services/core/adapters/kafka/topics.ts";
import { parseConversationKey } from "../../services/core/keys.ts";
import { keyOf } from "../../services/core/types.ts";

const neverDecoded = { decode: async () => ({ ok: false as const, reason: "no value expected" }) };

describe("erasure controls", () => {
  it("erase and erase-tenant are control kinds that erase; flush is not", async () => {
    for (const kind of ["erase", "erase-tenant"] as const) {
      assert.ok(isControlKind(kind) && isErasure(kind));
      assert.deepEqual(await decodeStageInput({ headers: { [CONTROL_HEADER]: kind }, value: null }, neverDecoded), {
        ok: true,
        input: { kind: "control", control: kind },
      });
    }
    assert.equal(isErasure("flush"), false);
    assert.equal(isControlKind("erase-all"), false);
  });

  it("an erase control carries the erased record ids through a stage: written as a header, read back, bad ones refused", async () => {
    const [m] = await outputMessages("sensory", [{ key: "k", control: "erase", erasedIds: ["r1", "r2"] }], undefined);
    assert.ok(m);
    const headers = m.headers as Record<string, string>;
    assert.equal(headers[ERASED_IDS_HEADER], JSON.stringify(["r1", "r2"]));
    assert.deepEqual(await decodeStageInput({ headers, value: null }, neverDecoded), {
      ok: true,
      input: { kind: "control", control: "erase", erasedIds: ["r1", "r2"] },
    });
    const [plain] = await outputMessages("sensory", [{ key: "k", control: "erase" }], undefined);
    assert.deepEqual(plain?.headers, { [CONTROL_HEADER]: "erase" }, "no ids, no header");
    const bad = await decodeStageInput(
      { headers: { [CONTROL_HEADER]: "erase", [ERASED_IDS_HEADER]: '{"not":"a list"}' }, value: null },
      neverDecoded,
    );
    assert.equal(bad.ok, false);
  });

  it("finds, for each partition, an erase-tenant key of the tenant that the default partitioner sends there", () => {
    const partitionOf = Partitioners.DefaultPartitioner();
    for (const partitions of [1, 3, 12]) {
      const keys = eraseTenantKeys("acme/eu", partitions);
      assert.equal(keys.length, partitions);
      const metadata = Array.from({ length: partitions }, (_, partitionId) => ({
        partitionId,
        leader: 0,
        replicas: [0],
        isr: [0],
        partitionErrorCode: 0,
      }));
      keys.forEach((key, p) => {
        assert.equal(partitionOf({ topic: "t", partitionMetadata: metadata, message: { key, value: null } }), p);
        assert.equal(parseConversationKey(key)?.tenant, "acme/eu", "the tenant is the key's tenant part");
        assert.deepEqual(eraseTenantShare(key), { partition: p, partitions }, "the key names its share");
        assert.equal(partitionOfKey(key, partitions), p);
      });
    }
  });

  it("an erase-tenant key of the earlier form, or any other key, names no share (the whole tenant is erased)", () => {
    assert.equal(eraseTenantShare(keyOf("acme", "\u0000erase-tenant:0:5")), undefined);
    assert.equal(eraseTenantShare(keyOf("acme", "erase-tenant:0/3:5")), undefined);
    assert.equal(eraseTenantShare(keyOf("acme", "\u0000erase-tenant:3/3:0")), undefined, "no partition 3 of 3");
    assert.equal(eraseTenantShare("no-separator"), undefined);
  });

  it("erasedKeys selects the conversation, or the tenant's conversations only (parsed, not prefixed)", () => {
    const one = erasedKeys("erase", keyOf("acme", "c1"));
    assert.deepEqual([one?.tenant, one?.conversation], ["acme", "c1"]);
    assert.ok(one?.matches(keyOf("acme", "c1")));
    assert.equal(one?.matches(keyOf("acme", "c10")), false);
    const all = erasedKeys("erase-tenant", keyOf("acme", "\u0000erase-tenant:0:0"));
    assert.ok(all?.matches(keyOf("acme", "x/y")));
    assert.equal(all?.matches(keyOf("acme/eu", "x")), false);
    assert.equal(all?.matches(keyOf("acm", "e/x")), false);
    assert.equal(erasedKeys("erase", "no-separator"), undefined);
  });

  it("dropMatching marks the selected held and changed keys deleted and leaves the others", () => {
    const held = new Map([
      ["acme/c1", 1],
      ["acme/c2", 2],
      ["globex/c1", 3],
    ]);
    const dirty = new Map<string, number | undefined>([
      ["acme/c3", 4],
      ["globex/c2", 5],
    ]);
    dropMatching(held, dirty, (k) => k.startsWith("acme/"));
    assert.deepEqual([...dirty].sort(), [
      ["acme/c1", undefined],
      ["acme/c2", undefined],
      ["acme/c3", undefined],
      ["globex/c2", 5],
    ]);
    assert.equal(held.size, 3, "the held states change only after the commit");
  });
});
