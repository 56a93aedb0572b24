import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseResidentSplit, residentSplit } from "../../services/bench/process-memory.ts";

describe("bench process memory: the RSS split by what backs it", () => {
  it("reads RssAnon and RssFile (kB) from a /proc status text", () => {
    const status = [
      "Name:\tnode",
      "VmRSS:\t 6581284 kB",
      "RssAnon:\t 4504016 kB",
      "RssFile:\t 2077268 kB",
      "RssShmem:\t       0 kB",
    ].join("\n");
    assert.deepEqual(parseResidentSplit(status), { anonBytes: 4504016 * 1024, fileBytes: 2077268 * 1024 });
  });

  it("says nothing when a field is missing (an older kernel, another system)", () => {
    assert.equal(parseResidentSplit("Name:\tnode\nVmRSS:\t 100 kB\nRssAnon:\t 80 kB\n"), undefined);
    assert.equal(parseResidentSplit(""), undefined);
  });

  it("this process: both parts on Linux, and they add up to about its RSS", {
    skip: process.platform !== "linux",
  }, () => {
    const split = residentSplit();
    assert.ok(split, "read from /proc/self/status");
    const rss = process.memoryUsage().rss;
    const sum = split.anonBytes + split.fileBytes;
    // Sampled at slightly different moments (and RssShmem apart): close, not equal.
    assert.ok(split.anonBytes > 0 && split.fileBytes > 0);
    assert.ok(sum > rss * 0.5 && sum < rss * 1.5, `anon + file ${sum} against RSS ${rss}`);
  });
});
