// The CLI applies the API's rules: `memory query` validates its arguments with QueryRequestSchema
// (exit 2, nothing opened), ingest files are validated as a whole with errors that name where, and
// `memory serve` refuses a public address while the default API key is configured. Each run is a
// real `memory` process on a temporary data folder, bounded by a timeout.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const dir = mkdtempSync(join(tmpdir(), "memory-cli-"));
const dataDir = join(dir, "data");

const memory = (args: string[], env: Record<string, string> = {}) => {
  const r = spawnSync(process.execPath, ["--import", "tsx", "services/cli/main.ts", ...args], {
    encoding: "utf8",
    timeout: 60_000,
    env: {
      ...process.env,
      MEMORY_CONFIG: join(dir, "no-such-config.json"),
      MEMORY_DATA_DIR: dataDir,
      MEMORY_API_KEYS: "",
      MEMORY_HTTP_HOST: "",
      ...env,
    },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

/** Nothing was written: the data folder was never opened, or holds no database. */
const nothingStored = (): boolean => !existsSync(dataDir) || readdirSync(dataDir).length === 0;

describe("CLI validation", { timeout: 300_000 }, () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("memory query: an empty question or a budget outside 50-32000 is a usage error (exit 2)", () => {
    for (const [args, pattern] of [
      [["query", ""], /<question>: /],
      [["query", "   "], /<question>: /],
      [["query", "where?", "--budget", "10"], /--budget: .*50/],
      [["query", "where?", "--budget", "999999999"], /--budget: .*32000/],
      [["query", "where?", "--budget", "abc"], /--budget: /],
      [["query", "where?", "--conversation", "c\u0001x"], /--conversation: must not contain control characters/],
    ] as const) {
      const r = memory([...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, pattern);
      assert.equal(r.stdout, "");
    }
    assert.ok(nothingStored());
  });

  it("memory ingest: a JSONL line with a bad timestamp names the line and field; nothing is ingested", () => {
    const file = join(dir, "turns.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({ conversation: "c1", speaker: "Ana", text: "hello", timestamp: "2023-05-08T10:00:00Z" }),
        JSON.stringify({ conversation: "c1", speaker: "Ana", text: "again", timestamp: "May 8" }),
      ].join("\n"),
    );
    const r = memory(["ingest", file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /turns\.jsonl:2: timestamp: must be an ISO-8601 date-time/);
    assert.ok(nothingStored());
  });

  it("memory ingest: a LoCoMo file with one bad turn names sample, session and turn; nothing is ingested", () => {
    const file = join(dir, "locomo.json");
    const sample = (id: string, speaker: string) => ({
      sample_id: id,
      conversation: {
        speaker_a: "Caroline",
        speaker_b: "Melanie",
        session_1_date_time: "1:56 pm on 8 May, 2023",
        session_1: [
          { speaker: "Caroline", dia_id: "D1:1", text: "hi" },
          { speaker, dia_id: "D1:2", text: "hello" },
        ],
      },
      qa: [],
    });
    writeFileSync(file, JSON.stringify([sample("conv-a", "Melanie"), sample("conv-b", "")]));
    const r = memory(["ingest", file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /1 problem\(s\), nothing ingested/);
    assert.match(r.stderr, /sample 1 \(conv-b\), session_1, turn 1 \(D1:2\) speaker: must not be empty/);
    assert.ok(nothingStored());
  });

  it("memory backfill-second-opinion: the setting off or a bad tenant is a usage error (exit 2); nothing is opened", () => {
    const off = memory(["backfill-second-opinion"], { MEMORY_SECOND_OPINION: "" });
    assert.equal(off.code, 2, off.stderr);
    assert.match(off.stderr, /the second opinion is off: run with MEMORY_SECOND_OPINION=1/);
    const bad = memory(["backfill-second-opinion", "--tenant", "bad\ttenant"], { MEMORY_SECOND_OPINION: "1" });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /invalid tenant "bad\\ttenant": a tenant name may hold only/);
    assert.ok(nothingStored());
  });

  it("memory serve: refuses a non-loopback address while the default API key is configured", () => {
    const r = memory(["serve"], { MEMORY_HTTP_HOST: "0.0.0.0" });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /refusing to serve on 0\.0\.0\.0: the default API key "dev-key-change-me"/);
    assert.ok(nothingStored());
  });
});
