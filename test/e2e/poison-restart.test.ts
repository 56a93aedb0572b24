import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { StatisticalCompressor } from "../../services/sensory/statistical-compressor.ts";

const MAX_ATTEMPTS = 2;

const turns: TurnInput[] = Array.from({ length: 12 }, (_, i) => ({
  turnId: `t${i}`,
  speaker: i % 2 ? "Ana" : "Ben",
  role: "user",
  text:
    i === 5 ? "POISON: the input the compressor never returns on" : `Ben planted ${i} tomatoes in Riverside on Monday.`,
  timestamp: new Date(Date.UTC(2024, 4, 6, 10, i)).toISOString(),
  sessionId: "s1",
}));

/** Runs the child on the data folder; resolves with the last line it printed, SIGKILLing it when it is stuck. */
const runChild = async (dataDir: string, mode: "ingest" | "resume"): Promise<string> => {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "test/e2e/fixtures/poison-child.ts", dataDir, mode, JSON.stringify(turns)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  let last = "";
  for await (const line of createInterface({ input: child.stdout })) {
    last = line;
    if (line === "stuck") {
      child.kill("SIGKILL");
      break;
    }
  }
  await exited;
  return last;
};

describe("a poison turn that hangs the process is dead-lettered after N restarts", () => {
  const dir = mkdtempSync(join(tmpdir(), "memory-poison-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it(`hangs ${MAX_ATTEMPTS + 1} runs (its batch, then ${MAX_ATTEMPTS} alone), then is set aside and the later turns flow`, {
    timeout: 180_000,
  }, async () => {
    // Run 1 takes the turns and hangs in the batch holding the poison; runs 2..N+1 go through that
    // batch one entry at a time and hang on the poison itself, each attempt counted on disk.
    assert.equal(await runChild(dir, "ingest"), "stuck");
    for (let run = 0; run < MAX_ATTEMPTS; run++) assert.equal(await runChild(dir, "resume"), "stuck", `run ${run + 2}`);

    // The next start sets the poison aside without calling the compressor on it, and drains.
    const opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), {
      embedder: new HashingEmbedder(),
      compressor: new StatisticalCompressor(),
      settings: { batchSize: 8, maxAttempts: MAX_ATTEMPTS },
    });
    try {
      await opened.engine.drain();
      const letters = await opened.engine.deadLetters(10);
      assert.equal(letters.length, 1, JSON.stringify(letters));
      assert.equal(letters[0]?.stage, "sensory+segmenter");
      assert.match(letters[0]?.error ?? "", /set aside after 2 unfinished attempts/);
      assert.match(letters[0]?.payload ?? "", /POISON/);
      const page = await opened.engine.listRecords("poison", { limit: 200 });
      const cited = new Set(page.records.flatMap((r) => r.source.turnIds));
      for (const id of ["t0", "t4", "t6", "t11"]) assert.ok(cited.has(id), `${id} in ${[...cited].join(" ")}`);
      assert.ok(!cited.has("t5"));
      assert.equal((await opened.engine.health()).details.inboxLag, "0");
    } finally {
      await opened.close();
    }
  });
});
