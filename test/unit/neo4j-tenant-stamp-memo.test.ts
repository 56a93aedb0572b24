import assert from "node:assert/strict";
import { test } from "node:test";
import { TenantStampMemo, TenantStampReader } from "../../services/core/adapters/neo4j/tenant-stamp-memo.ts";

/** Records stamps by tenant (turns: `turns`), with every read the reader sent (its tenants). */
const fakeStamps = (initial: Record<string, string | null>) => {
  const stamps = new Map(Object.entries(initial));
  const turns = new Map<string, string | null>();
  const reads: string[][] = [];
  return {
    stamps,
    turns,
    reads,
    reader: new TenantStampReader(async (tenants) => {
      reads.push([...tenants].sort());
      return new Map(tenants.map((t) => [t, { records: stamps.get(t) ?? null, turns: turns.get(t) ?? null }]));
    }),
  };
};

/** A read that counts its calls and answers the current value of `data`. */
const counted = <V>(data: { value: V }) => {
  const calls = { n: 0 };
  return {
    calls,
    read: async () => {
      calls.n++;
      return data.value;
    },
  };
};

test("lookups that start together share one stamp read; a later one reads again", async () => {
  const f = fakeStamps({ a: "s1", b: "s9" });
  await Promise.all([
    f.reader.stampOf("a", "records"),
    f.reader.stampOf("a", "records"),
    f.reader.stampOf("b", "records"),
  ]);
  assert.deepEqual(f.reads, [["a", "b"]]);
  assert.equal(await f.reader.stampOf("a", "records"), "s1");
  assert.equal(f.reads.length, 2);
});

test("a lookup after a read was sent is not answered by it", async () => {
  const f = fakeStamps({ a: "s1" });
  const first = f.reader.stampOf("a", "records");
  // Let the first read go out, then change the stamp before the second lookup starts.
  await Promise.resolve();
  await Promise.resolve();
  f.stamps.set("a", "s2");
  const second = f.reader.stampOf("a", "records");
  assert.equal(await first, "s1");
  assert.equal(await second, "s2");
  assert.equal(f.reads.length, 2);
});

test("a result is kept while the tenant's stamp holds and read again when it changes", async () => {
  const f = fakeStamps({ a: "s1" });
  const memo = new TenantStampMemo<string[]>(f.reader, "records", 8);
  const data = { value: ["Caroline"] };
  const r = counted(data);
  assert.deepEqual(await memo.get("a", "k", r.read), ["Caroline"]);
  data.value = ["Caroline", "Melanie"];
  assert.deepEqual(await memo.get("a", "k", r.read), ["Caroline"], "unchanged stamp: the kept result");
  assert.equal(r.calls.n, 1);
  f.stamps.set("a", "s2");
  assert.deepEqual(await memo.get("a", "k", r.read), ["Caroline", "Melanie"]);
  assert.equal(r.calls.n, 2);
});

test("a tenant without a stamp is read every time", async () => {
  const f = fakeStamps({ a: null });
  const memo = new TenantStampMemo<number>(f.reader, "records", 8);
  const data = { value: 1 };
  const r = counted(data);
  assert.equal(await memo.get("a", "k", r.read), 1);
  data.value = 2;
  assert.equal(await memo.get("a", "k", r.read), 2);
  assert.equal(r.calls.n, 2);
  // Erased (no stamp) and written again (a new stamp): nothing from before is served.
  f.stamps.set("a", "s1");
  data.value = 3;
  assert.equal(await memo.get("a", "k", r.read), 3);
});

test("one tenant's write leaves another tenant's kept results alone", async () => {
  const f = fakeStamps({ a: "s1", b: "s1" });
  const memo = new TenantStampMemo<string>(f.reader, "records", 8);
  const ra = counted({ value: "a" });
  const rb = counted({ value: "b" });
  await memo.get("a", "ka", ra.read);
  await memo.get("b", "kb", rb.read);
  f.stamps.set("a", "s2");
  await memo.get("a", "ka", ra.read);
  await memo.get("b", "kb", rb.read);
  assert.deepEqual([ra.calls.n, rb.calls.n], [2, 1]);
});

test("at most `capacity` results are kept, the least recently used dropped first", async () => {
  const f = fakeStamps({ a: "s1" });
  const memo = new TenantStampMemo<string>(f.reader, "records", 2);
  const reads = { k1: counted({ value: "1" }), k2: counted({ value: "2" }), k3: counted({ value: "3" }) };
  await memo.get("a", "k1", reads.k1.read);
  await memo.get("a", "k2", reads.k2.read);
  await memo.get("a", "k1", reads.k1.read); // k1 used last: k2 is the oldest now
  await memo.get("a", "k3", reads.k3.read);
  await memo.get("a", "k1", reads.k1.read);
  await memo.get("a", "k2", reads.k2.read);
  assert.deepEqual([reads.k1.calls.n, reads.k2.calls.n, reads.k3.calls.n], [1, 2, 1]);
  assert.throws(() => new TenantStampMemo<string>(f.reader, "records", 0), RangeError);
});

test("a turns write leaves results kept under the records stamp alone, and the other way round", async () => {
  const f = fakeStamps({ a: "r1" });
  f.turns.set("a", "t1");
  const onRecords = new TenantStampMemo<string>(f.reader, "records", 8);
  const onTurns = new TenantStampMemo<string>(f.reader, "turns", 8);
  const rr = counted({ value: "records" });
  const rt = counted({ value: "turns" });
  const both = async () => Promise.all([onRecords.get("a", "k", rr.read), onTurns.get("a", "k", rt.read)]);
  await both();
  f.turns.set("a", "t2");
  await both();
  assert.deepEqual([rr.calls.n, rt.calls.n], [1, 2]);
  f.stamps.set("a", "r2");
  await both();
  assert.deepEqual([rr.calls.n, rt.calls.n], [2, 2]);
  assert.equal(f.reads.length, 3, "the two lookups of a round share one stamp read");
});
