// The distributed consolidator's trigger settings (services/consolidator/service-settings.ts) and
// the lag trigger it adds to the shared scheduler decision (scheduler.ts dueReason).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dueReason } from "../../services/consolidator/scheduler.ts";
import { crashHookFromEnv, scheduleFrom } from "../../services/consolidator/service-settings.ts";
import { loadConfig } from "../../services/core/config.ts";

const noon = Date.parse("2024-05-01T12:00:00Z");

describe("distributed consolidator settings", () => {
  it("reads the window, idle and lag triggers and the consumer group from the environment", () => {
    const config = loadConfig(
      {},
      {
        MEMORY_CONSOLIDATION_WINDOW: "01:00-05:00",
        MEMORY_CONSOLIDATION_IDLE_MINUTES: "0",
        MEMORY_CONSOLIDATION_LAG_THRESHOLD: "10",
        MEMORY_CONSOLIDATOR_GROUP: "memory-consolidator-b",
        MEMORY_CONSOLIDATION_CHECK_INTERVAL_MS: "500",
      },
    );
    assert.equal(config.consolidation.consumerGroup, "memory-consolidator-b");
    assert.equal(config.consolidation.checkIntervalMs, 500);
    assert.deepEqual(scheduleFrom(config.consolidation), {
      idleMs: 0,
      maxInboxLag: 0,
      window: { startMin: 60, endMin: 300 },
      lagThreshold: 10,
    });
    const defaults = loadConfig({}, {});
    assert.equal(defaults.consolidation.consumerGroup, "memory-consolidator");
    assert.equal(scheduleFrom(defaults.consolidation).lagThreshold, undefined, "no lag trigger unless set");
  });

  it("the lag trigger holds while the upstream lag is at or below its threshold", () => {
    const s = { idleMs: 0, maxInboxLag: 0, lagThreshold: 10 };
    const probe = { nowMs: noon, lastActivityMs: noon, inboxLag: 10, pending: 1 };
    assert.equal(dueReason(s, probe), "lag");
    assert.equal(dueReason(s, { ...probe, inboxLag: 11 }), undefined);
    assert.equal(dueReason(s, { ...probe, inboxLag: Number.POSITIVE_INFINITY }), undefined, "lag unknown yet");
    assert.equal(dueReason({ idleMs: 0, maxInboxLag: 0 }, { ...probe, inboxLag: 0 }), undefined, "off by default");
  });

  it("crash injection only when asked for", () => {
    assert.equal(crashHookFromEnv({}), undefined);
    assert.equal(crashHookFromEnv({ MEMORY_CONSOLIDATOR_CRASH_AT_DECISION: "" }), undefined);
    assert.throws(() => crashHookFromEnv({ MEMORY_CONSOLIDATOR_CRASH_AT_DECISION: "x" }));
    assert.equal(typeof crashHookFromEnv({ MEMORY_CONSOLIDATOR_CRASH_AT_DECISION: "2" }), "function");
  });
});
