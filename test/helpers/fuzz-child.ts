/**
 * Starts test/helpers/fuzz-server.ts as a child process and stops it: SIGTERM first (a graceful
 * close), SIGKILL when it does not exit in time (a server whose event loop is stuck).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Keys of the fuzz servers: two tenants, so cross-tenant paths are exercised too. */
export const FUZZ_KEYS = { "fuzz-key-tenant-a-0001": "fuzz-a", "fuzz-key-tenant-b-0002": "fuzz-b" } as const;
export const KEY_A = "fuzz-key-tenant-a-0001";
export const TENANT_A = "fuzz-a";

export interface FuzzServer {
  /** Base URL of the HTTP server, e.g. http://127.0.0.1:40123 */
  http: string;
  /** host:port of the gRPC server. */
  grpc: string;
  /** The server's log lines (stderr), for failure reports. */
  log: string[];
  /** True once the child has exited (crashed or stopped). */
  exited(): boolean;
  stop(): Promise<void>;
}

const SERVER = join(dirname(fileURLToPath(import.meta.url)), "fuzz-server.ts");

export const startFuzzServer = async (startMs = 60_000): Promise<FuzzServer> => {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", SERVER], {
    env: { ...process.env, FUZZ_API_KEYS: JSON.stringify(FUZZ_KEYS) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log: string[] = [];
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once("exit", () => {
      exited = true;
      resolve();
    }),
  );
  let errBuf = "";
  child.stderr?.on("data", (d: Buffer) => {
    errBuf += d.toString();
    const lines = errBuf.split("\n");
    errBuf = lines.pop() ?? "";
    // Bounded: a flood of log lines must not grow the test's memory without end.
    for (const l of lines) if (log.length < 2000) log.push(l);
  });
  const info = await new Promise<{ http: string; grpc: string; dataDir: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fuzz server did not start in ${startMs} ms`)), startMs);
    let out = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) {
        clearTimeout(timer);
        try {
          resolve(JSON.parse(out.slice(0, nl)) as { http: string; grpc: string; dataDir: string });
        } catch (err) {
          reject(err);
        }
      }
    });
    void exit.then(() => {
      clearTimeout(timer);
      reject(new Error(`fuzz server exited before it listened:\n${log.join("\n")}`));
    });
  });
  return {
    http: info.http,
    grpc: info.grpc,
    log,
    exited: () => exited,
    stop: async () => {
      if (!exited) {
        child.kill("SIGTERM");
        const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await exit;
        clearTimeout(killer);
      }
      rmSync(info.dataDir, { recursive: true, force: true });
    },
  };
};
