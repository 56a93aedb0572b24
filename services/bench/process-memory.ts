/**
 * This process's resident memory split by what backs it (Linux `/proc/self/status`): anonymous
 * pages (the JS heap, hnswlib's indexes, SQLite's page cache, the model) and file-backed pages
 * (SQLite's memory-mapped database, up to `sqliteMmapMiB`, and the mapped code and model files).
 * RSS alone counts both; the file-backed pages are the OS's page cache, shared and dropped under
 * memory pressure, so at a large store the RSS says more about the mmap window than about what the
 * process holds.
 */
import { readFileSync } from "node:fs";

export interface ResidentSplit {
  anonBytes: number;
  fileBytes: number;
}

/** Parses RssAnon and RssFile (kB) from a `/proc/<pid>/status` text; undefined when either is missing. */
export const parseResidentSplit = (status: string): ResidentSplit | undefined => {
  const kb = (field: string): number | undefined => {
    const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, "m").exec(status);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const anonBytes = kb("RssAnon");
  const fileBytes = kb("RssFile");
  return anonBytes === undefined || fileBytes === undefined ? undefined : { anonBytes, fileBytes };
};

/** The split of this process now, or undefined where `/proc` does not say (not Linux). */
export const residentSplit = (): ResidentSplit | undefined => {
  try {
    return parseResidentSplit(readFileSync("/proc/self/status", "utf8"));
  } catch {
    return undefined;
  }
};
