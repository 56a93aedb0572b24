import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { z } from "zod";

const num = z.coerce.number();

export const ConfigSchema = z.object({
  dataDir: z.string().default("./data"),
  modelDir: z.string().default("./models"),
  http: z
    .object({ host: z.string().default("127.0.0.1"), port: num.int().min(0).max(65535).default(8787) })
    .default({ host: "127.0.0.1", port: 8787 }),
  /** API key -> tenant. The tenant always comes from the credential, never from a body. */
  apiKeys: z.record(z.string().min(8), z.string().min(1)).default({ "dev-key-change-me": "default" }),
  sensory: z.object({ keepRate: num.gt(0).max(1).default(0.7) }).default({ keepRate: 0.7 }),
  segmenter: z
    .object({
      threshold: num.default(0.55),
      hardCapTokens: num.int().positive().default(2000),
      bufferTokens: num.int().nonnegative().default(512),
      idleTimeoutMs: num
        .int()
        .positive()
        .default(30 * 60_000),
    })
    .default({ threshold: 0.55, hardCapTokens: 2000, bufferTokens: 512, idleTimeoutMs: 30 * 60_000 }),
  query: z
    .object({
      budget: num.int().positive().default(1000),
      rrfK: num.positive().default(60),
      mmrLambda: num.min(0).max(1).default(0.7),
    })
    .default({ budget: 1000, rrfK: 60, mmrLambda: 0.7 }),
  runtime: z.object({ queueCapacity: num.int().positive().default(64) }).default({ queueCapacity: 64 }),
});
export type Config = z.infer<typeof ConfigSchema>;

type Json = Record<string, unknown>;

const setPath = (obj: Json, path: readonly string[], value: unknown): void => {
  let cur = obj;
  for (const p of path.slice(0, -1)) {
    const next = cur[p];
    if (typeof next !== "object" || next === null) cur[p] = {};
    cur = cur[p] as Json;
  }
  cur[path[path.length - 1] as string] = value;
};

/** Environment variables that override the file, by config path. */
const ENV_PATHS: Record<string, string[]> = {
  MEMORY_DATA_DIR: ["dataDir"],
  MEMORY_MODEL_DIR: ["modelDir"],
  MEMORY_HTTP_HOST: ["http", "host"],
  MEMORY_HTTP_PORT: ["http", "port"],
  MEMORY_KEEP_RATE: ["sensory", "keepRate"],
  MEMORY_SEGMENT_THRESHOLD: ["segmenter", "threshold"],
  MEMORY_BUFFER_TOKENS: ["segmenter", "bufferTokens"],
  MEMORY_IDLE_TIMEOUT_MS: ["segmenter", "idleTimeoutMs"],
  MEMORY_QUERY_BUDGET: ["query", "budget"],
  MEMORY_QUEUE_CAPACITY: ["runtime", "queueCapacity"],
};

/** "key1=tenantA,key2=tenantB" */
const parseApiKeys = (raw: string): Record<string, string> =>
  Object.fromEntries(
    raw
      .split(",")
      .map((pair) => pair.trim())
      .filter(Boolean)
      .map((pair) => {
        const i = pair.indexOf("=");
        if (i <= 0) throw new Error(`MEMORY_API_KEYS: expected key=tenant, got "${pair}"`);
        return [pair.slice(0, i), pair.slice(i + 1)];
      }),
  );

/**
 * Configuration from an optional JSON file (MEMORY_CONFIG or ./memory.config.json), then the
 * environment, then explicit overrides; validated as a whole so that a bad value fails at start.
 */
export const loadConfig = (overrides: Json = {}, env: NodeJS.ProcessEnv = process.env): Config => {
  const file = env.MEMORY_CONFIG ?? "memory.config.json";
  const raw: Json = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Json) : {};
  for (const [name, path] of Object.entries(ENV_PATHS)) {
    const v = env[name];
    if (v !== undefined && v !== "") setPath(raw, path, v);
  }
  if (env.MEMORY_API_KEYS) raw.apiKeys = parseApiKeys(env.MEMORY_API_KEYS);
  const merged = { ...raw, ...overrides };
  const parsed = ConfigSchema.safeParse(merged);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new Error(`invalid configuration: ${msg}`);
  }
  return { ...parsed.data, dataDir: resolve(parsed.data.dataDir), modelDir: resolve(parsed.data.modelDir) };
};
