/**
 * Property: whatever the tenant and conversation names (separators `/` `:` `::` `%`, escapes that
 * look like encoded separators, accents, CJK, emoji; NUL is generated too, and names holding it are
 * dropped because the API refuses them), no tenant reads another's data through any
 * route of the HTTP app over the embedded engine, and erasing one tenant's conversation or the
 * whole tenant leaves the other's data whole. Half of the cases are built adversarially: tenant B is
 * tenant A + separator + x, and A's conversation is x + separator + B's conversation, the shape
 * that made `acme`'s `eu/c1` and `acme/eu`'s `c1` one key.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import { idSchema } from "../../services/core/input-rules.ts";
import { TenantNameSchema } from "../../services/core/tenant-name.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { Metrics } from "../../services/platform/metrics.ts";

const SEPARATORS = ["/", ":", "::", "%", "%2F", "%3A", "%25", "\u0000"];
const CHARS = ["a", "b", "c", "/", ":", "%", "2", "F", ".", "-", " ", "é", "e\u0301", "東", "🦊", "\u0000"];

const unit = fc.constantFrom(...CHARS);
const validTenant = (s: string) => TenantNameSchema.safeParse(s).success;
/**
 * Conversation names the API takes (the id rule: no control characters, so a NUL is a 400 — tested
 * in http-validation) and the HTTP path can carry: trimmed, not a dot segment (URLs resolve `.`/`..`).
 */
const validConversation = (s: string) => idSchema().safeParse(s).success && s.trim() === s && s !== "." && s !== "..";

const tenantName = fc.string({ unit, minLength: 1, maxLength: 10 }).filter(validTenant);
const conversationName = fc.string({ unit, minLength: 1, maxLength: 10 }).filter(validConversation);

interface Case {
  tenantA: string;
  tenantB: string;
  convA: string;
  convB: string;
}

const adversarial: fc.Arbitrary<Case> = fc
  .record({ base: tenantName, sep: fc.constantFrom(...SEPARATORS), x: conversationName, convB: conversationName })
  .map(({ base, sep, x, convB }) => ({
    tenantA: base,
    tenantB: `${base}${sep}${x}`,
    convA: `${x}${sep}${convB}`,
    convB,
  }))
  .filter((c) => validTenant(c.tenantB) && validConversation(c.convA));

const random: fc.Arbitrary<Case> = fc
  .record({ tenantA: tenantName, tenantB: tenantName, convA: conversationName, convB: conversationName })
  .filter((c) => c.tenantA !== c.tenantB);

const KEY_A = "key-of-tenant-a";
const KEY_B = "key-of-tenant-b";
const path = (conversation: string) => encodeURIComponent(conversation).replace(/\./g, "%2E");

describe("no tenant reads another's data, whatever the names (property, embedded runtime over HTTP)", () => {
  let dir: string;
  let opened: OpenedEngine;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "tenant-isolation-"));
    opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder() });
  });
  after(async () => {
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("holds over 25 seeded cases: query, records, record, history; erasure of one leaves the other", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(adversarial, random), async (c) => {
        run++;
        // Words the hashing embedder and the lexical route both match; unique per run and side.
        const secretA = `velmora${"q".repeat(run)}alpha`;
        const secretB = `velmora${"q".repeat(run)}beta`;
        const app = createHttpApp({
          service: opened.engine,
          apiKeys: { [KEY_A]: c.tenantA, [KEY_B]: c.tenantB },
          metrics: new Metrics({ defaultMetrics: false }),
        });
        const call = async (method: string, url: string, key: string, json?: unknown) => {
          const res = await app.request(url, {
            method,
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
          });
          return { status: res.status, text: await res.text() };
        };
        const ingest = async (key: string, conv: string, secret: string) => {
          const r = await call("POST", `/v1/conversations/${path(conv)}/turns:batch`, key, {
            turns: [
              { speaker: "Ana", text: `Ana moved to ${secret} last spring.`, timestamp: "2024-05-06T10:00:00Z" },
              { speaker: "Ana", text: `Ana loves painting in ${secret}.`, timestamp: "2024-05-06T10:01:00Z" },
            ],
          });
          assert.equal(r.status, 202, r.text);
          assert.equal((await call("POST", `/v1/conversations/${path(conv)}/flush`, key, {})).status, 202);
        };
        await ingest(KEY_A, c.convA, secretA);
        await ingest(KEY_B, c.convB, secretB);
        await opened.engine.drain();

        const records = async (key: string): Promise<MemoryRecord[]> => {
          const out: MemoryRecord[] = [];
          let cursor: string | null = null;
          for (let page = 0; page < 50; page++) {
            const r = await call(
              "GET",
              `/v1/records?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
              key,
            );
            assert.equal(r.status, 200, r.text);
            const body = JSON.parse(r.text) as { records: MemoryRecord[]; nextCursor: string | null };
            out.push(...body.records);
            cursor = body.nextCursor;
            if (!cursor) break;
          }
          return out;
        };
        const reads = async (key: string, conv: string, secret: string): Promise<string> => {
          const question = `Where did Ana move? ${secret}`;
          const all = await call("POST", "/v1/query", key, { question });
          const inConv = await call("POST", "/v1/query", key, { question, conversation: conv });
          assert.equal(all.status, 200, all.text);
          assert.equal(inConv.status, 200, inConv.text);
          // What the tenant is shown (the plan echoes the question, so it is left out).
          const shown = (text: string) => {
            const body = JSON.parse(text) as { context: string; items: unknown[] };
            return `${body.context}\n${JSON.stringify(body.items)}`;
          };
          return [shown(all.text), shown(inConv.text), JSON.stringify(await records(key))].join("\n");
        };
        const seenByA = await reads(KEY_A, c.convA, secretB);
        const seenByB = await reads(KEY_B, c.convB, secretA);
        assert.ok(
          !seenByA.includes(secretB),
          `tenant ${JSON.stringify(c.tenantA)} read ${JSON.stringify(c.tenantB)}'s data`,
        );
        assert.ok(
          !seenByB.includes(secretA),
          `tenant ${JSON.stringify(c.tenantB)} read ${JSON.stringify(c.tenantA)}'s data`,
        );
        assert.ok(seenByA.includes(secretA) && seenByB.includes(secretB), "each tenant reads its own data");

        const recordsB = (await records(KEY_B)).filter((r) => r.text.includes(secretB));
        assert.ok(recordsB.length > 0, "tenant B has records of this run");
        for (const r of recordsB) {
          assert.equal((await call("GET", `/v1/records/${encodeURIComponent(r.id)}`, KEY_A)).status, 404);
          assert.equal((await call("GET", `/v1/records/${encodeURIComponent(r.id)}/history`, KEY_A)).status, 404);
          assert.equal((await call("GET", `/v1/records/${encodeURIComponent(r.id)}`, KEY_B)).status, 200);
        }

        // Erasing A's conversation, then all of A, leaves every record and turn of B.
        assert.equal((await call("DELETE", `/v1/conversations/${path(c.convA)}`, KEY_A)).status, 200);
        const afterConv = await reads(KEY_B, c.convB, secretB);
        assert.ok(afterConv.includes(secretB), "B's data survives the erasure of A's conversation");
        assert.equal(
          (await records(KEY_B)).filter((r) => r.text.includes(secretB)).length,
          recordsB.length,
          "no record of B erased",
        );
        assert.ok(!(await reads(KEY_A, c.convA, secretA)).includes(secretA), "A's conversation is gone");
        const erase = await call("DELETE", `/v1/tenant?confirm=${encodeURIComponent(c.tenantA)}`, KEY_A);
        assert.equal(erase.status, 200, erase.text);
        assert.equal((await records(KEY_B)).filter((r) => r.text.includes(secretB)).length, recordsB.length);
        // B cleans up so later cases start from its absence (names may repeat across cases).
        assert.equal((await call("DELETE", `/v1/tenant?confirm=${encodeURIComponent(c.tenantB)}`, KEY_B)).status, 200);
      }),
      { seed: 20261201, numRuns: 25, endOnFailure: true, includeErrorInReport: true },
    );
  });
});
