/** The tests' Closer (test/helpers/closer.ts): what a failed test leaves open is closed once, and only once. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Closer } from "../helpers/closer.ts";

const counted = () => {
  const o = { closes: 0, name: "engine", close: async () => void o.closes++ };
  return o;
};

describe("Closer", () => {
  it("closes what is still open, once", async () => {
    const closer = new Closer();
    const raw = counted();
    const tracked = await closer.track(Promise.resolve(raw));
    assert.equal(tracked.name, "engine", "the opened thing's properties are kept");
    await closer.closeAll();
    await closer.closeAll();
    assert.equal(raw.closes, 1);
  });

  it("does not close again what the test closed itself", async () => {
    const closer = new Closer();
    const raw = counted();
    const tracked = await closer.track(raw);
    await tracked.close();
    await tracked.close();
    await closer.closeAll();
    assert.equal(raw.closes, 1);
  });
});
