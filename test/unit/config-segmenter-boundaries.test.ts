// MEMORY_SEGMENTER_BOUNDARIES: which signals cut a segment (docs/segmenter.md). The default is the
// measured one; the three modes load; a bad value names the field and the variable; the stage
// settings carry the mode to the segmenter of both runtimes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { segmenterSettingsFrom } from "../../services/composition/parts.ts";
import { loadConfig } from "../../services/core/config.ts";

const env = (vars: Record<string, string> = {}): NodeJS.ProcessEnv => ({ MEMORY_CONFIG: "", ...vars });

describe("config: segmenter boundaries", () => {
  it("defaults to the similarity gate alone (the measured default, docs/segmenter.md)", () => {
    assert.equal(loadConfig({}, env()).segmenter.boundaries, "gate");
    assert.equal(segmenterSettingsFrom(loadConfig({}, env())).boundaries, "gate");
  });

  it("reads every mode from MEMORY_SEGMENTER_BOUNDARIES into the segmenter's settings", () => {
    for (const mode of ["gate", "attention", "both"] as const) {
      const c = loadConfig({}, env({ MEMORY_SEGMENTER_BOUNDARIES: mode }));
      assert.equal(c.segmenter.boundaries, mode);
      assert.equal(segmenterSettingsFrom(c).boundaries, mode);
    }
  });

  it("names the field and the variable of a bad mode", () => {
    assert.throws(
      () => loadConfig({}, env({ MEMORY_SEGMENTER_BOUNDARIES: "lightmem" })),
      (err: Error) => {
        assert.ok(err.message.includes("segmenter.boundaries: "), err.message);
        assert.ok(err.message.includes("[MEMORY_SEGMENTER_BOUNDARIES]"), err.message);
        return true;
      },
    );
  });
});
