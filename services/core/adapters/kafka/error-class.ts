/**
 * Which handler failures a stage retries without end and which become dead letters (issue 12).
 *
 * A dead letter is for a value that no retry can fix: it is invalid, or the stage's own logic
 * refuses it. A dependency that is down (Neo4j restarting, the schema registry unreachable, an LLM
 * answering 429 or 5xx) is no property of the value: the partition waits and retries, so healthy
 * data never reaches the DLQ because of an outage. Classified by shape (name, code, status, the
 * cause chain), not by class, because the adapters that throw them are not imported here.
 */

export type Dependency = "neo4j" | "registry" | "llm" | "kafka" | "network";

export type ErrorClass =
  /** Retried after a backoff, for as long as it takes; the partition is paused meanwhile. */
  | { kind: "transient"; dependency: Dependency }
  /** Straight to the DLQ with the reason. */
  | { kind: "permanent" }
  /** Neither recognised: a few bounded retries, then the DLQ (the runtime's earlier behaviour). */
  | { kind: "unknown" };

/** Socket and DNS failures of Node and undici: the peer is unreachable, not the value wrong. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EAI_AGAIN",
  "ENOTFOUND",
  "ESOCKETTIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  // axios (the schema-registry client): no response at all
  "ERR_NETWORK",
]);

/** Neo4j driver codes that mean "the server or cluster is not there right now". */
const NEO4J_TRANSIENT = new Set(["ServiceUnavailable", "SessionExpired"]);

/** Errors that carry the value's fault: validation, our own refusals, an LLM's output invalid after its retries. */
const PERMANENT_NAMES = new Set(["PoisonError", "ValidationError", "ZodError", "LlmEncoderError", "SyntaxError"]);

const KAFKA_TRANSIENT_NAMES = new Set([
  "KafkaJSConnectionError",
  "KafkaJSRequestTimeoutError",
  "KafkaJSConnectionClosedError",
  "KafkaJSBrokerNotFound",
  "KafkaJSLockTimeout",
]);

type Shape = {
  name?: unknown;
  code?: unknown;
  status?: unknown;
  statusCode?: unknown;
  message?: unknown;
  retriable?: unknown;
  cause?: unknown;
  errors?: unknown;
};

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** Which dependency an error names, from its name or message (the fallback is the network). */
const dependencyOf = (e: Shape, hint: Dependency | undefined): Dependency => {
  const text = `${str(e.name)} ${str(e.message)}`.toLowerCase();
  if (text.includes("neo4j") || str(e.code).startsWith("Neo.") || NEO4J_TRANSIENT.has(str(e.code))) return "neo4j";
  if (text.includes("llm") || text.includes("openai")) return "llm";
  if (text.includes("registry") || text.includes("schema")) return "registry";
  if (text.includes("kafkajs")) return "kafka";
  return hint ?? "network";
};

/** One error of the chain: a verdict, or undefined when it says nothing. */
const classifyOne = (e: Shape, hint: Dependency | undefined): ErrorClass | undefined => {
  const name = str(e.name);
  const code = str(e.code);
  if (PERMANENT_NAMES.has(name)) return { kind: "permanent" };
  if (
    NEO4J_TRANSIENT.has(code) ||
    code.startsWith("Neo.TransientError.") ||
    (name === "Neo4jError" && e.retriable === true)
  )
    return { kind: "transient", dependency: "neo4j" };
  // "Unable to load NODE …": another transaction (an erasure, a consolidation) deleted an entity
  // this one had matched. A race, not the value's fault: after a few attempts the read sees the
  // committed state. Bounded, because the same code also names a statement's own mistake ("…has
  // been deleted in this transaction"), which no retry fixes.
  if (code === "Neo.ClientError.Statement.EntityNotFound" && /unable to load/i.test(str(e.message)))
    return { kind: "unknown" };
  if (name === "Neo4jError" && code.startsWith("Neo.ClientError.")) return { kind: "permanent" };
  if (NETWORK_CODES.has(code)) return { kind: "transient", dependency: dependencyOf(e, hint) };
  if (name === "TimeoutError" || KAFKA_TRANSIENT_NAMES.has(name))
    return { kind: "transient", dependency: name.startsWith("KafkaJS") ? "kafka" : dependencyOf(e, hint) };
  const status = num(e.status) ?? num(e.statusCode);
  if (status !== undefined) {
    // 408/429/5xx: the service is overloaded or down. 401/403: it refuses every call alike (a key
    // or a grant is missing), so dead-lettering would throw away healthy values until it is fixed.
    if (status === 408 || status === 429 || status >= 500 || status === 401 || status === 403)
      return { kind: "transient", dependency: dependencyOf(e, hint) };
    if (status >= 400) return { kind: "permanent" };
  }
  // undici's fetch rejects with TypeError("fetch failed") and the socket error as its cause.
  if (name === "TypeError" && str(e.message) === "fetch failed")
    return { kind: "transient", dependency: hint ?? "network" };
  return undefined;
};

/**
 * The class of a failure, looking through `cause` and AggregateError's `errors` (a wrapped
 * ECONNREFUSED is still an outage). `hint` names the dependency the call site was talking to,
 * used when the error itself does not say (a bare ECONNREFUSED from the registry client).
 */
export const classifyError = (err: unknown, hint?: Dependency): ErrorClass => {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  let verdict: ErrorClass | undefined;
  while (queue.length > 0 && seen.size < 16) {
    const e = queue.shift();
    if (e === null || typeof e !== "object" || seen.has(e)) continue;
    seen.add(e);
    const shape = e as Shape;
    const one = classifyOne(shape, hint);
    // The outermost permanent verdict wins (a PoisonError wrapping a timeout is the stage's decision);
    // otherwise the first transient one found along the chain.
    if (one?.kind === "permanent" && verdict === undefined) return one;
    if (one?.kind === "transient") return one;
    if (shape.cause !== undefined) queue.push(shape.cause);
    if (Array.isArray(shape.errors)) queue.push(...shape.errors);
    verdict ??= one;
  }
  return verdict ?? { kind: "unknown" };
};

const FENCED_TYPES = new Set(["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"]);

/**
 * Whether a transactional call failed because another producer took the transactional id (a
 * newer owner of the partition fenced this one). kafkajs wraps the protocol error in a
 * KafkaJSNonRetriableError that keeps only its message, so the message is checked too.
 */
export const isFenced = (err: unknown): boolean => {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && e !== null && typeof e === "object"; depth++) {
    const shape = e as Shape & { type?: unknown };
    if (FENCED_TYPES.has(str(shape.type))) return true;
    const message = str(shape.message);
    if (message.includes("operation with an old epoch") || /producer.*fenced/i.test(message)) return true;
    e = shape.cause;
  }
  return false;
};
