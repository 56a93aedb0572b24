// The committed gRPC code (services/platform/grpc/generated) is exactly what schemas/memory.proto
// generates with buf.gen.yaml: a proto edit without `npm run generate:grpc`, or a hand edit of the
// generated code, fails here with the files named (scripts/check-grpc.mjs).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";

describe("generated gRPC code", () => {
  it("matches schemas/memory.proto byte for byte", () => {
    const r = spawnSync(process.execPath, ["scripts/check-grpc.mjs"], { encoding: "utf8", timeout: 120_000 });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /match schemas\/memory\.proto/);
  });
});
