// Configuration rules that protect a deployment: API key messages in words, the body limit and
// failed-auth limit from the environment, the cursor secret, and the default-key exposure check.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type Config,
  cursorSecretOf,
  DEFAULT_API_KEY,
  DEFAULT_MAX_BODY_BYTES,
  defaultKeyExposure,
  isLoopbackHost,
  loadConfig,
} from "../../services/core/config.ts";

/** No config file: MEMORY_CONFIG points at a path that does not exist. */
const env = (vars: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  MEMORY_CONFIG: "/nonexistent/memory.config.json",
  ...vars,
});

describe("config rules", () => {
  it("says in words what is wrong with a short API key, without printing the key", () => {
    assert.throws(
      () => loadConfig({}, env({ MEMORY_API_KEYS: "ka=tenant-a" })),
      (err: Error) => {
        assert.match(err.message, /apiKeys: API keys must be at least 8 characters \(a key of 2 characters\)/);
        assert.doesNotMatch(err.message, /Invalid key in record|\bka\b/);
        return true;
      },
    );
  });

  it("takes the body limit, the failed-auth limit and the cursor secret from the environment", () => {
    const defaults = loadConfig({}, env());
    assert.equal(defaults.http.maxBodyBytes, DEFAULT_MAX_BODY_BYTES);
    assert.equal(defaults.http.authFailuresPerMinute, 20);
    assert.equal(defaults.cursorSecret, undefined);
    const set = loadConfig(
      {},
      env({
        MEMORY_HTTP_MAX_BODY_BYTES: "65536",
        MEMORY_AUTH_FAILURES_PER_MINUTE: "0",
        MEMORY_CURSOR_SECRET: "a-long-enough-secret",
      }),
    );
    assert.equal(set.http.maxBodyBytes, 65536);
    assert.equal(set.http.authFailuresPerMinute, 0);
    assert.equal(cursorSecretOf(set), "a-long-enough-secret");
    assert.throws(
      () => loadConfig({}, env({ MEMORY_HTTP_MAX_BODY_BYTES: "12" })),
      /http\.maxBodyBytes: must be at least 1024 bytes/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_CURSOR_SECRET: "short" })),
      /cursorSecret: must be at least 16 characters/,
    );
  });

  it("derives the cursor secret from the API keys: equal for equal keys in any order, different otherwise", () => {
    const a = loadConfig({}, env({ MEMORY_API_KEYS: "key-one-123=a,key-two-456=b" }));
    const b = loadConfig({}, env({ MEMORY_API_KEYS: "key-two-456=b,key-one-123=a" }));
    const c = loadConfig({}, env({ MEMORY_API_KEYS: "key-three-789=a" }));
    assert.equal(cursorSecretOf(a), cursorSecretOf(b));
    assert.notEqual(cursorSecretOf(a), cursorSecretOf(c));
    assert.doesNotMatch(cursorSecretOf(a), /key-one/);
  });

  it("refuses the default key on a non-loopback address and warns on loopback", () => {
    const withHost = (host: string, apiKeys: Record<string, string>): Pick<Config, "apiKeys" | "http"> => ({
      apiKeys,
      http: { host, port: 8787, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, authFailuresPerMinute: 20 },
    });
    const dev = { [DEFAULT_API_KEY]: "default" };
    assert.equal(defaultKeyExposure(withHost("0.0.0.0", dev)), "refuse");
    assert.equal(defaultKeyExposure(withHost("192.168.1.10", dev)), "refuse");
    assert.equal(defaultKeyExposure(withHost("::", dev)), "refuse");
    assert.equal(defaultKeyExposure(withHost("127.0.0.1", dev)), "warn");
    assert.equal(defaultKeyExposure(withHost("::1", dev)), "warn");
    assert.equal(defaultKeyExposure(withHost("0.0.0.0", { "real-key-123": "t" })), "ok");
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) assert.ok(isLoopbackHost(host), host);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "example.com", "127.0.0.1.example.com"])
      assert.ok(!isLoopbackHost(host), host);
  });
});
