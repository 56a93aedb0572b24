// Failed-authentication limit per client address: windows, Retry-After, and bounded memory.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AuthFailureLimiter } from "../../services/gateway/auth-failure-limiter.ts";

describe("AuthFailureLimiter", () => {
  it("refuses an address after `limit` failures until its window ends", () => {
    let now = 0;
    const limiter = new AuthFailureLimiter({ limit: 2, windowMs: 60_000, now: () => now });
    limiter.fail("a");
    assert.equal(limiter.retryAfterSeconds("a"), 0);
    limiter.fail("a");
    assert.equal(limiter.retryAfterSeconds("a"), 60);
    assert.equal(limiter.retryAfterSeconds("b"), 0);
    now = 59_500;
    assert.equal(limiter.retryAfterSeconds("a"), 1);
    now = 60_000;
    assert.equal(limiter.retryAfterSeconds("a"), 0);
    // A new window starts from scratch.
    limiter.fail("a");
    assert.equal(limiter.retryAfterSeconds("a"), 0);
  });

  it("keeps at most maxAddresses windows, evicting the least recently failed", () => {
    const limiter = new AuthFailureLimiter({ limit: 1, maxAddresses: 100, now: () => 0 });
    for (let i = 0; i < 10_000; i++) limiter.fail(`10.0.${i >> 8}.${i & 255}`);
    assert.equal(limiter.size, 100);
    assert.ok(limiter.retryAfterSeconds("10.0.39.15") > 0, "the last address is still tracked");
    assert.equal(limiter.retryAfterSeconds("10.0.0.0"), 0, "the first was evicted");
  });

  it("limit 0 disables it", () => {
    const limiter = new AuthFailureLimiter({ limit: 0 });
    for (let i = 0; i < 100; i++) limiter.fail("a");
    assert.equal(limiter.retryAfterSeconds("a"), 0);
    assert.equal(limiter.size, 0);
  });
});
