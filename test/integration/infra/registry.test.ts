// Smoke test for the local Confluent-compatible schema registry (infra/registry.sh) through
// @confluentinc/schemaregistry: register an Avro schema, fetch it by id and as latest version,
// then round-trip a value through AvroSerializer/AvroDeserializer (Confluent wire format).
// Skips unless SCHEMA_REGISTRY_URL is set (npm run infra:up; eval "$(bash infra/env.sh)").
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { AvroDeserializer, AvroSerializer, SchemaRegistryClient, SerdeType } from "@confluentinc/schemaregistry";

const url = process.env.SCHEMA_REGISTRY_URL;
const skip = !url ? "SCHEMA_REGISTRY_URL not set: start with npm run infra:up" : false;

const turnSchema = {
  type: "record",
  name: "Turn",
  namespace: "memory.smoke",
  fields: [
    { name: "tenant", type: "string" },
    { name: "turnId", type: "string" },
    { name: "text", type: "string" },
    { name: "timestamp", type: { type: "long", logicalType: "timestamp-millis" } },
    { name: "sessionId", type: ["null", "string"], default: null },
  ],
};

test("schema registry: register, fetch by id, Avro serialize/deserialize", { skip, timeout: 60_000 }, async () => {
  const topic = `infra-smoke-${randomUUID().slice(0, 8)}`;
  const subject = `${topic}-value`;
  const client = new SchemaRegistryClient({ baseURLs: [url ?? ""], maxRetries: 2 });
  try {
    const schemaInfo = { schemaType: "AVRO", schema: JSON.stringify(turnSchema) };
    const id = await client.register(subject, schemaInfo);
    assert.ok(Number.isInteger(id) && id > 0, `schema id ${id}`);
    // Registering the same schema again is idempotent.
    assert.equal(await client.register(subject, schemaInfo), id);

    // A fresh client (no cache) fetches it back from the server.
    const fresh = new SchemaRegistryClient({ baseURLs: [url ?? ""] });
    try {
      const byId = await fresh.getBySubjectAndId(subject, id);
      assert.deepEqual(JSON.parse(byId.schema), turnSchema);
      const latest = await fresh.getLatestSchemaMetadata(subject);
      assert.equal(latest.id, id);
      assert.equal(latest.version, 1);
      assert.deepEqual(await fresh.getAllSubjects().then((s) => s.includes(subject)), true);
    } finally {
      await fresh.close();
    }

    const serializer = new AvroSerializer(client, SerdeType.VALUE, { useLatestVersion: true });
    const deserializer = new AvroDeserializer(client, SerdeType.VALUE, {});
    const value = {
      tenant: "acme",
      turnId: "t-1",
      text: "remember that the meeting moved to Friday",
      timestamp: Date.parse("2026-01-02T03:04:05.000Z"),
      sessionId: "s-9",
    };
    const bytes = await serializer.serialize(topic, value);
    // Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro body.
    assert.equal(bytes[0], 0);
    assert.equal(bytes.readInt32BE(1), id);
    const back = await deserializer.deserialize(topic, bytes);
    assert.deepEqual({ ...back }, value);

    // An incompatible change (BACKWARD by default) is refused.
    const incompatible = { ...turnSchema, fields: [...turnSchema.fields, { name: "role", type: "string" }] };
    await assert.rejects(client.register(subject, { schemaType: "AVRO", schema: JSON.stringify(incompatible) }));
  } finally {
    await client.deleteSubject(subject, false).catch(() => undefined);
    await client.deleteSubject(subject, true).catch(() => undefined);
    await client.close();
  }
});
