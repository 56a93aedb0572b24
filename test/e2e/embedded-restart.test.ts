import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { loadConfig } from "../../services/core/config.ts";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";

const DATA = "../shared/data/locomo-dev.json";
const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const CONV = "conv-30";
const TURNS = 120;
const skip = !existsSync(DATA)
  ? `${DATA} not found`
  : !existsSync(MODEL)
    ? "model missing: run node scripts/setup.mjs"
    : false;

/** Every record id of the tenant, via the paginated listing. */
const allRecordIds = async (dataDir: string, turns: number): Promise<string[]> => {
  const conv = loadLocomo(DATA).find((c) => c.id === CONV);
  assert.ok(conv);
  const opened = await openEmbeddedEngine(loadConfig({ dataDir }));
  try {
    await opened.engine.ingest("restart", CONV, conv.turns.slice(0, turns));
    await opened.engine.flush("restart", CONV);
    await opened.engine.drain();
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await opened.engine.listRecords("restart", { limit: 200, ...(cursor ? { cursor } : {}) });
      ids.push(...page.records.map((r) => r.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return ids;
  } finally {
    await opened.close();
  }
};

describe("embedded runtime survives a crash mid-ingest", { skip }, () => {
  const dirs: string[] = [];
  const tmp = () => {
    const d = mkdtempSync(join(tmpdir(), "memory-restart-"));
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("SIGKILL in the middle, restart, ingest the rest: same records as an uninterrupted run, none twice", async () => {
    const crashed = tmp();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "test/e2e/fixtures/ingest-child.ts", crashed, DATA, CONV, String(TURNS)],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let killedAt = -1;
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    for await (const line of createInterface({ input: child.stdout })) {
      const m = /^progress (\d+) (\d+)$/.exec(line);
      // Kill once some segments are indexed and some turns are not yet processed.
      if (m && Number(m[1]) >= TURNS / 3 && Number(m[2]) >= 1) {
        killedAt = Number(m[1]);
        child.kill("SIGKILL");
        break;
      }
      assert.notEqual(line, "done", "the child finished before it could be killed");
    }
    await exited;
    assert.ok(killedAt > 0 && killedAt < TURNS, `killed at ${killedAt} turns`);

    const afterRestart = await allRecordIds(crashed, TURNS);
    const reference = await allRecordIds(tmp(), TURNS);
    assert.ok(reference.length > 20, `reference has ${reference.length} records`);
    assert.equal(new Set(afterRestart).size, afterRestart.length, "no record listed twice");
    assert.deepEqual([...afterRestart].sort(), [...reference].sort());
  });
});
