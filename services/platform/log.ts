/**
 * Logging of every process: one JSON object per line on stdout (errors also on stderr, so a
 * supervisor that only keeps stderr still sees them). Process events (started, stopping,
 * committed) go through a LogFn; HTTP request logs go through pino, which the HTTP app takes.
 */
import { type Logger, pino } from "pino";

export type LogLevel = "info" | "warn" | "error";
export type LogFn = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** A LogFn that stamps each line with the time and the process's name (the stage or service). */
export const jsonLogger =
  (stage: string): LogFn =>
  (level, msg, fields = {}) => {
    const line = JSON.stringify({ t: new Date().toISOString(), level, stage, msg, ...fields });
    if (level === "error") process.stderr.write(`${line}\n`);
    process.stdout.write(`${line}\n`);
  };

/** The request logger of an HTTP front door (5xx and slow requests; see gateway/http-app.ts). */
export const requestLogger = (name: string): Logger => pino({ name });
