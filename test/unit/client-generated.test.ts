// The TypeScript client's committed types (clients/typescript/src/generated) are exactly what
// schemas/openapi.yaml generates: an API edit without `npm run generate -w @streaming-memory/client`,
// or a hand edit of the generated types, fails here with the files named (scripts/check-client.mjs).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { MAX_BATCH_TURNS as DOCUMENTED_BATCH_TURNS } from "../../clients/typescript/src/generated/limits.ts";
import { MAX_BATCH_TURNS } from "../../services/gateway/http-app.ts";

const GENERATED = "clients/typescript/src/generated";
const check = (...args: string[]) =>
  spawnSync(process.execPath, ["scripts/check-client.mjs", ...args], { encoding: "utf8", timeout: 120_000 });

describe("generated client types", () => {
  it("match schemas/openapi.yaml byte for byte", () => {
    const r = check();
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /2 file\(s\) match schemas\/openapi\.yaml/);
  });

  it("fail with the file named when the committed types drift from the document", () => {
    // An altered copy of the committed folder stands for a hand edit / a document edit not regenerated.
    const copy = mkdtempSync(join(tmpdir(), "client-gen-"));
    try {
      cpSync(GENERATED, copy, { recursive: true });
      const limits = join(copy, "limits.ts");
      writeFileSync(limits, readFileSync(limits, "utf8").replace("MAX_BATCH_TURNS = 1000", "MAX_BATCH_TURNS = 999"));
      writeFileSync(join(copy, "stale.ts"), "export {};\n");
      const r = check(copy);
      assert.equal(r.status, 1, `${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /limits\.ts: differs from what schemas\/openapi\.yaml generates/);
      assert.match(r.stderr, /stale\.ts: committed but no longer generated/);
      assert.match(r.stderr, /npm run generate -w @streaming-memory\/client/);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it("carry the batch limit the gateway enforces (the client splits at it)", () => {
    assert.equal(DOCUMENTED_BATCH_TURNS, MAX_BATCH_TURNS);
  });
});
