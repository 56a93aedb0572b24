#!/usr/bin/env node
// A small Confluent-compatible schema registry for local development and integration tests.
//
// Why this exists: Apicurio Registry (the intended server, through its ccompat API) ships no
// runnable jar on Maven Central, and the modules needed to re-package it (Apicurio 2.6/3.x
// app dependencies) are not all served by the registries this project may use; Confluent's
// registry is not on Maven Central and Karapace is not on PyPI. See README-infra.md.
//
// It speaks the subset of the Confluent Schema Registry REST API that the Confluent clients
// (@confluentinc/schemaregistry, Kafka serdes) use:
//   GET  /  /schemas/types  /schemas/ids/{id}[?subject=]  /schemas/ids/{id}/schema
//        /schemas/ids/{id}/versions  /schemas/ids/{id}/subjects
//   GET  /subjects  /subjects/{s}/versions  /subjects/{s}/versions/{v|latest}[/schema]
//   POST /subjects/{s}/versions (register)   POST /subjects/{s} (look up)
//   DELETE /subjects/{s}[?permanent=true]  /subjects/{s}/versions/{v}[?permanent=true]
//   POST /compatibility/subjects/{s}/versions/{v|latest}
//   GET|PUT /config  GET|PUT|DELETE /config/{s}  GET /mode  GET /mode/{s}
// Ids are global and shared by identical schemas, versions are per subject, soft deletes are
// kept. AVRO schemas are validated and checked for compatibility (BACKWARD default, FORWARD,
// FULL, *_TRANSITIVE, NONE) with avsc resolvers; JSON and PROTOBUF are stored as given.
// State is a JSON file rewritten atomically after each change.
//
// Usage: node infra/registry/schema-registry.mjs --port 18081 --data DIR [--host 127.0.0.1]
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import http from "node:http";
import path from "node:path";

const args = Object.fromEntries(
  process.argv.slice(2).flatMap((a, i, all) => (a.startsWith("--") ? [[a.slice(2).split("=")[0], a.includes("=") ? a.split("=").slice(1).join("=") : all[i + 1]]] : [])),
);
const PORT = Number(args.port ?? process.env.REGISTRY_PORT ?? 18081);
const HOST = args.host ?? "127.0.0.1";
const DATA = path.resolve(args.data ?? "infra/.work/data/registry");
const STATE_FILE = path.join(DATA, "registry.json");
const LEVELS = ["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"];

let avro = null;
try {
  avro = createRequire(import.meta.url)("avsc");
} catch {
  console.warn("avsc not found (run npm install): AVRO schemas are stored without validation");
}

// ---- state -----------------------------------------------------------------------------
/** @type {{nextId:number, schemas:Record<string,{id:number,schemaType:string,schema:string,references:any[],key:string}>, subjects:Record<string,{versions:{version:number,id:number,deleted:boolean}[]}>, config:{global:string, subjects:Record<string,string>}}} */
let state = { nextId: 1, schemas: {}, subjects: {}, config: { global: "BACKWARD", subjects: {} } };
mkdirSync(DATA, { recursive: true });
try {
  state = JSON.parse(readFileSync(STATE_FILE, "utf8"));
} catch (e) {
  if (e.code !== "ENOENT") throw e;
}
function save() {
  const tmp = `${STATE_FILE}.tmp`;
  writeFileSync(tmp, JSON.stringify(state));
  renameSync(tmp, STATE_FILE);
}

class HttpError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}
const notFoundSubject = (s) => new HttpError(404, 40401, `Subject '${s}' not found.`);
const notFoundVersion = (v) => new HttpError(404, 40402, `Version ${v} not found.`);
const notFoundSchema = (what) => new HttpError(404, 40403, `Schema ${what} not found`);

function canonical(schemaType, schema) {
  if (schemaType === "PROTOBUF") return schema.trim();
  try {
    return JSON.stringify(JSON.parse(schema));
  } catch {
    throw new HttpError(422, 42201, `Invalid schema: not valid JSON`);
  }
}
const schemaKey = (t, canon, refs) => JSON.stringify([t, canon, (refs ?? []).map((r) => [r.name, r.subject, r.version])]);

function liveVersions(subject) {
  const s = state.subjects[subject];
  return s ? s.versions.filter((v) => !v.deleted) : [];
}
function findVersion(subject, version, includeDeleted = false) {
  const s = state.subjects[subject];
  if (!s || (!includeDeleted && liveVersions(subject).length === 0)) throw notFoundSubject(subject);
  const pool = includeDeleted ? s.versions : liveVersions(subject);
  if (version === "latest" || version === "-1") {
    const v = pool.at(-1);
    if (!v) throw notFoundVersion(version);
    return v;
  }
  if (!/^\d+$/.test(version)) throw new HttpError(422, 42202, `The specified version '${version}' is not a valid version id.`);
  const v = pool.find((x) => x.version === Number(version));
  if (!v) throw notFoundVersion(version);
  return v;
}
function schemaById(id) {
  const s = state.schemas[String(id)];
  if (!s) throw notFoundSchema(id);
  return s;
}
function view(s) {
  const out = { schema: s.schema };
  if (s.schemaType !== "AVRO") out.schemaType = s.schemaType;
  if (s.references?.length) out.references = s.references;
  return out;
}
function versionView(subject, v) {
  return { subject, version: v.version, id: v.id, ...view(schemaById(v.id)) };
}

/** Parses an AVRO schema, after the schemas it references, into an avsc Type. */
function avroType(schema, references) {
  const registry = {};
  const seen = new Set();
  const load = (text, refs) => {
    for (const ref of refs ?? []) {
      const dep = schemaById(findVersion(ref.subject, String(ref.version)).id);
      if (seen.has(dep.id)) continue;
      seen.add(dep.id);
      load(dep.schema, dep.references);
    }
    return avro.Type.forSchema(JSON.parse(text), { registry });
  };
  try {
    return load(schema, references);
  } catch (e) {
    throw new HttpError(422, 42201, `Invalid schema: ${e.message}`);
  }
}

function compatibilityLevel(subject) {
  return state.config.subjects[subject] ?? state.config.global;
}
/** Returns the list of incompatibility messages of `candidate` against the subject's versions. */
function incompatibilities(subject, candidate, against) {
  const level = compatibilityLevel(subject);
  if (level === "NONE" || candidate.schemaType !== "AVRO" || !avro) return [];
  const live = liveVersions(subject);
  const targets = against ?? (level.endsWith("_TRANSITIVE") ? live : live.slice(-1));
  const newType = avroType(candidate.schema, candidate.references);
  const problems = [];
  for (const t of targets) {
    const old = schemaById(t.id);
    if (old.schemaType !== "AVRO") continue;
    const oldType = avroType(old.schema, old.references);
    const checks = level.startsWith("FULL") ? ["BACKWARD", "FORWARD"] : [level.replace("_TRANSITIVE", "")];
    for (const c of checks) {
      try {
        if (c === "BACKWARD") newType.createResolver(oldType);
        else oldType.createResolver(newType);
      } catch (e) {
        problems.push(`${c} incompatible with version ${t.version}: ${e.message}`);
      }
    }
  }
  return problems;
}

function parseBody(body) {
  const schema = body?.schema;
  if (typeof schema !== "string" || schema.length === 0) throw new HttpError(422, 42201, "Invalid schema: empty");
  const schemaType = (body.schemaType ?? "AVRO").toUpperCase();
  if (!["AVRO", "JSON", "PROTOBUF"].includes(schemaType)) throw new HttpError(422, 42201, `Unsupported schema type ${schemaType}`);
  const references = Array.isArray(body.references) ? body.references : [];
  const canon = canonical(schemaType, schema);
  if (schemaType === "AVRO" && avro) avroType(schema, references);
  return { schemaType, schema, references, key: schemaKey(schemaType, canon, references) };
}

function register(subject, body) {
  const cand = parseBody(body);
  const existing = liveVersions(subject).find((v) => schemaById(v.id).key === cand.key);
  if (existing) return versionView(subject, existing);
  const problems = incompatibilities(subject, cand);
  if (problems.length) {
    throw new HttpError(409, 409, `Schema being registered is incompatible with an earlier schema for subject "${subject}", details: ${problems.join("; ")}`);
  }
  let stored = Object.values(state.schemas).find((s) => s.key === cand.key);
  if (!stored) {
    stored = { id: state.nextId++, ...cand };
    state.schemas[String(stored.id)] = stored;
  }
  const sub = (state.subjects[subject] ??= { versions: [] });
  const version = (sub.versions.at(-1)?.version ?? 0) + 1;
  const v = { version, id: stored.id, deleted: false };
  sub.versions.push(v);
  save();
  return versionView(subject, v);
}

// ---- routing ---------------------------------------------------------------------------
function route(method, parts, q, body) {
  const [a, b, c, d, e] = parts;
  const deleted = q.get("deleted") === "true";
  if (parts.length === 0) return {};
  if (a === "schemas") {
    if (b === "types" && !c) return ["AVRO", "JSON", "PROTOBUF"];
    if (b === "ids" && c) {
      const s = schemaById(c);
      if (!d) return view(s);
      if (d === "schema") return { raw: s.schema };
      const uses = Object.entries(state.subjects).flatMap(([name, sub]) =>
        sub.versions.filter((v) => v.id === s.id && (deleted || !v.deleted)).map((v) => ({ subject: name, version: v.version })),
      );
      if (d === "versions") return uses;
      if (d === "subjects") return [...new Set(uses.map((u) => u.subject))];
    }
  }
  if (a === "subjects") {
    if (!b && method === "GET") {
      return Object.keys(state.subjects).filter((s) => deleted || liveVersions(s).length > 0).sort();
    }
    const subject = b;
    if (!c) {
      if (method === "POST") {
        const cand = parseBody(body);
        const live = deleted ? state.subjects[subject]?.versions ?? [] : liveVersions(subject);
        if (!state.subjects[subject]) throw notFoundSubject(subject);
        const hit = live.find((v) => schemaById(v.id).key === cand.key);
        if (!hit) throw notFoundSchema("");
        return versionView(subject, hit);
      }
      if (method === "DELETE") {
        const sub = state.subjects[subject];
        if (!sub) throw notFoundSubject(subject);
        const permanent = q.get("permanent") === "true";
        const affected = permanent ? sub.versions : liveVersions(subject);
        if (!permanent && affected.length === 0) throw notFoundSubject(subject);
        const nums = affected.map((v) => v.version);
        if (permanent) delete state.subjects[subject];
        else for (const v of affected) v.deleted = true;
        save();
        return nums;
      }
    }
    if (c === "versions") {
      if (!d && method === "GET") {
        if (!state.subjects[subject]) throw notFoundSubject(subject);
        const vs = deleted ? state.subjects[subject].versions : liveVersions(subject);
        if (vs.length === 0) throw notFoundSubject(subject);
        return vs.map((v) => v.version);
      }
      if (!d && method === "POST") return register(subject, body);
      if (d && method === "GET") {
        const v = findVersion(subject, d, deleted);
        return e === "schema" ? { raw: schemaById(v.id).schema } : versionView(subject, v);
      }
      if (d && method === "DELETE") {
        const permanent = q.get("permanent") === "true";
        const v = findVersion(subject, d, permanent);
        if (permanent) state.subjects[subject].versions = state.subjects[subject].versions.filter((x) => x !== v);
        else v.deleted = true;
        save();
        return v.version;
      }
    }
  }
  if (a === "compatibility" && b === "subjects" && c && d === "versions" && e && method === "POST") {
    const cand = parseBody(body);
    const against = liveVersions(c).length ? [findVersion(c, e)] : [];
    const problems = incompatibilities(c, cand, against);
    return { is_compatible: problems.length === 0, ...(q.get("verbose") === "true" ? { messages: problems } : {}) };
  }
  if (a === "config") {
    if (method === "GET") {
      if (!b) return { compatibilityLevel: state.config.global };
      const level = state.config.subjects[b];
      if (!level) {
        if (q.get("defaultToGlobal") === "true") return { compatibilityLevel: state.config.global };
        throw new HttpError(404, 40408, `Subject '${b}' does not have subject-level compatibility configured`);
      }
      return { compatibilityLevel: level };
    }
    if (method === "PUT") {
      const level = String(body?.compatibility ?? body?.compatibilityLevel ?? "").toUpperCase();
      if (!LEVELS.includes(level)) throw new HttpError(422, 42203, `Invalid compatibility level ${level}`);
      if (b) state.config.subjects[b] = level;
      else state.config.global = level;
      save();
      return { compatibility: level };
    }
    if (method === "DELETE" && b) {
      const level = state.config.subjects[b] ?? state.config.global;
      delete state.config.subjects[b];
      save();
      return { compatibilityLevel: level };
    }
  }
  if (a === "mode" && method === "GET") return { mode: "READWRITE" };
  throw new HttpError(404, 404, `HTTP 404 Not Found: ${method} /${parts.join("/")}`);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let status = 200;
    let payload;
    try {
      const url = new URL(req.url ?? "/", "http://localhost");
      const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
      const text = Buffer.concat(chunks).toString("utf8");
      let body;
      if (text) {
        try {
          body = JSON.parse(text);
        } catch {
          throw new HttpError(400, 400, "Unrecognized request body: not JSON");
        }
      }
      payload = route(req.method ?? "GET", parts, url.searchParams, body);
    } catch (err) {
      if (err instanceof HttpError) {
        status = err.status;
        payload = { error_code: err.code, message: err.message };
      } else {
        status = 500;
        payload = { error_code: 50001, message: String(err?.stack ?? err) };
        console.error(err);
      }
    }
    const raw = payload && typeof payload === "object" && "raw" in payload && Object.keys(payload).length === 1;
    const out = raw ? payload.raw : JSON.stringify(payload);
    res.writeHead(status, { "content-type": raw ? "text/plain" : "application/vnd.schemaregistry.v1+json" });
    res.end(out);
    if (process.env.REGISTRY_LOG_REQUESTS) console.log(`${req.method} ${req.url} -> ${status}`);
  });
});
server.listen(PORT, HOST, () => console.log(`schema registry listening on http://${HOST}:${PORT} (data ${STATE_FILE})`));
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    console.log(`${sig}: shutting down`);
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  });
}
