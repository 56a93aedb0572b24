/**
 * memory.v1.Memory's method definitions as grpc-js's proto loader shaped them: keyed by the
 * method names of the .proto (Ingest, ListRecords, ...), with request serialisers that take a
 * partial message (absent fields go as the proto's defaults). For callers that build messages by
 * hand and speak bytes to a method named as on the wire, such as the gRPC fuzz test; the server
 * and the typed client use the generated MemoryService as it is.
 */
import {
  type DeepPartial,
  FlushRequest,
  GetRecordRequest,
  IngestRequest,
  ListRecordsRequest,
  MemoryService,
  type MessageFns,
  QueryRequest,
} from "./generated/memory.ts";

type MethodKey = keyof typeof MemoryService;
type RequestOf<K extends MethodKey> = Parameters<(typeof MemoryService)[K]["requestSerialize"]>[0];

/** Each method's request message; the compiler checks it against the generated definition. */
const REQUESTS: { [K in MethodKey]: MessageFns<RequestOf<K>> } = {
  ingest: IngestRequest,
  flush: FlushRequest,
  query: QueryRequest,
  listRecords: ListRecordsRequest,
  getRecord: GetRecordRequest,
};

type LooseMethod<K extends MethodKey> = Omit<(typeof MemoryService)[K], "requestSerialize"> & {
  requestSerialize: (value: DeepPartial<RequestOf<K>>) => Buffer;
};

export type LooseMemoryServiceDefinition = { [K in MethodKey as Capitalize<K>]: LooseMethod<K> };

const loose = <K extends MethodKey>(key: K): LooseMethod<K> => {
  const method = MemoryService[key];
  const request = REQUESTS[key] as MessageFns<RequestOf<K>>;
  return {
    ...method,
    requestSerialize: (value: DeepPartial<RequestOf<K>>): Buffer =>
      // fromPartial's Exact<> bound cannot be proven for a generic K; the value is a DeepPartial of it.
      Buffer.from(request.encode(request.fromPartial(value as never)).finish()),
  };
};

/** The definition keyed by the proto's method names, taking partial request messages. */
export const memoryServiceDefinition = (): LooseMemoryServiceDefinition => ({
  Ingest: loose("ingest"),
  Flush: loose("flush"),
  Query: loose("query"),
  ListRecords: loose("listRecords"),
  GetRecord: loose("getRecord"),
});
