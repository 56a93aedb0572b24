import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RecentConversations } from "../../services/gateway/recent-conversations.ts";

describe("RecentConversations (the gateway's conversations for a tenant-wide flush)", () => {
  it("is bounded over all tenants together, forgetting the least recently written first", () => {
    const recent = new RecentConversations(3);
    for (let t = 0; t < 10; t++) recent.remember(`tenant-${t}`, "c");
    assert.equal(recent.size, 3);
    assert.deepEqual(recent.of("tenant-0"), []);
    assert.deepEqual(recent.of("tenant-9"), ["c"]);
  });

  it("a write moves a conversation to the back; forget and forgetTenant drop pairs", () => {
    const recent = new RecentConversations(3);
    recent.remember("acme/eu", "a");
    recent.remember("acme/eu", "b");
    recent.remember("acme", "eu/a");
    recent.remember("acme/eu", "a"); // now the newest
    recent.remember("other", "x"); // pushes out the oldest: acme/eu b
    assert.deepEqual(recent.of("acme/eu"), ["a"]);
    assert.deepEqual(recent.of("acme"), ["eu/a"]); // separators in names do not collide
    recent.forget("acme/eu", "a");
    assert.deepEqual(recent.of("acme/eu"), []);
    recent.forgetTenant("other");
    assert.deepEqual(recent.of("other"), []);
    assert.equal(recent.size, 1);
  });

  it("refuses a capacity below one", () => {
    assert.throws(() => new RecentConversations(0), /capacity/);
  });
});
