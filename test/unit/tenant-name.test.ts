import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../../services/core/config.ts";
import { MAX_TENANT_NAME_LENGTH, TenantNameSchema } from "../../services/core/tenant-name.ts";

const ok = (name: string): boolean => TenantNameSchema.safeParse(name).success;
const noFile = { MEMORY_CONFIG: "/nonexistent/memory.config.json" };

describe("tenant names", () => {
  it("allows letters of any script, digits, punctuation (/ : % .), symbols, emoji and inner spaces", () => {
    for (const name of [
      "acme",
      "acme/eu",
      "a:b",
      "50%",
      "acme.eu",
      "Zürich AG",
      "東京",
      "e\u0301",
      "🦊",
      "a=b",
      "x".repeat(MAX_TENANT_NAME_LENGTH),
    ])
      assert.ok(ok(name), JSON.stringify(name));
  });

  it("rejects empty, too long, control and format characters, other whitespace, leading/trailing spaces", () => {
    for (const name of [
      "",
      "x".repeat(MAX_TENANT_NAME_LENGTH + 1),
      "a\u0000b",
      "a\nb",
      "a\tb",
      "\u007f",
      "a\u200bb",
      "a\u202eb",
      "a\u00a0b",
      " acme",
      "acme ",
      "\ud800",
    ])
      assert.equal(ok(name), false, JSON.stringify(name));
  });

  it("counts characters, not UTF-16 units: 128 emoji are allowed", () => {
    assert.ok(ok("🦊".repeat(MAX_TENANT_NAME_LENGTH)));
  });

  it("stops configuration loading with the rule in words", () => {
    assert.deepEqual(loadConfig({}, { ...noFile, MEMORY_API_KEYS: "key-aaaaaaaa=acme/eu" }).apiKeys, {
      "key-aaaaaaaa": "acme/eu",
    });
    assert.throws(
      () => loadConfig({ apiKeys: { "key-aaaaaaaa": "bad\u0000tenant" } }, noFile),
      /invalid configuration: apiKeys\..*tenant name may hold only Unicode letters/,
    );
    assert.throws(
      () => loadConfig({}, { ...noFile, MEMORY_API_KEYS: "key-aaaaaaaa= acme" }),
      /tenant name may not start or end with a space/,
    );
  });
});
