// check.mjs drives a cfp emulator (or any Cosmos DB account that has the /_cfp admin API) with
// the real JavaScript SDK, @azure/cosmos as pinned in package.json, and prints a JSON summary:
//
//	{"sdk":"4.10.1","database":"...","passed":N,"failed":M,"checks":[{"name","ok","detail"},...]}
//
// It exits 0 when every check passed, 1 when one failed and 2 when it could not run at all.
// Environment: COSMOS_ENDPOINT (http://127.0.0.1:PORT/) and COSMOS_KEY (the account key, never
// printed); CFP_EMULATOR_CERT, the emulator's certificate (emulator.pem), for the TLS checks; CFP_JSSDK_DATABASE names the database (default: a fresh jssdk-<time> one).
//
// Run it through jssdk_test.go (CFP_JSSDK=1 go test ./test/jssdk -v), which starts the emulator.

import { readFileSync } from "node:fs";
import { Agent } from "node:https";
import { createRequire } from "node:module";
import { ChangeFeedStartFrom, CosmosClient } from "@azure/cosmos";
import { AdminError, adminClient } from "./admin.mjs";
import { runProperty } from "./property.mjs";

const require = createRequire(import.meta.url);
const sdkVersion = require("@azure/cosmos/package.json").version;

const endpoint = process.env.COSMOS_ENDPOINT;
const key = process.env.COSMOS_KEY;
if (!endpoint || !key) {
  console.error("check.mjs: set COSMOS_ENDPOINT and COSMOS_KEY");
  process.exit(2);
}
const dbName = process.env.CFP_JSSDK_DATABASE || `jssdk-${Date.now()}`;

const client = new CosmosClient({ endpoint, key });
const checks = [];

// check runs one named check: fn returns a detail string or throws (an assertion or an SDK
// error); the detail never holds the key (SDK errors carry the response, not the request).
async function check(name, fn) {
  try {
    const detail = await fn();
    checks.push({ name, ok: true, detail: detail ?? "" });
  } catch (err) {
    checks.push({ name, ok: false, detail: describe(err) });
  }
}

function describe(err) {
  if (err instanceof AssertionError) return err.message;
  const code = err?.code !== undefined ? ` (status ${err.code}${err.substatus ? "/" + err.substatus : ""})` : "";
  return `${err?.name ?? "Error"}: ${String(err?.message ?? err).slice(0, 400)}${code}`;
}

class AssertionError extends Error {}

function assert(cond, msg) {
  if (!cond) throw new AssertionError(msg);
}

function sameSet(got, want, what) {
  const g = [...got].sort();
  const w = [...want].sort();
  const missing = w.filter((x) => !g.includes(x));
  const extra = g.filter((x) => !w.includes(x));
  assert(missing.length === 0 && extra.length === 0, `${what}: missing [${missing}], unexpected [${extra}]`);
}

function noDuplicates(ids, what) {
  const seen = new Set();
  const dups = ids.filter((id) => (seen.has(id) ? true : (seen.add(id), false)));
  assert(dups.length === 0, `${what}: delivered more than once: [${[...new Set(dups)]}]`);
}

// statusOf runs fn and returns the HTTP status it ended with: the response's statusCode, or the
// code of the error it threw.
async function statusOf(fn) {
  try {
    const res = await fn();
    return res.statusCode;
  } catch (err) {
    if (typeof err?.code === "number") return err.code;
    throw err;
  }
}

// drain reads iterator until a 304 (every range checked and nothing new) and returns the items
// and the last continuation token.
async function drain(iterator, maxPages = 200) {
  const items = [];
  let pages = 0;
  for (;;) {
    const res = await iterator.readNext();
    if (res.statusCode === 304) return { items, token: res.continuationToken, pages };
    assert(res.statusCode === 200, `change feed page answered ${res.statusCode}`);
    items.push(...res.result);
    pages++;
    assert(pages <= maxPages, `change feed did not reach a 304 after ${maxPages} pages`);
  }
}

// readPages reads n pages that hold changes (status 200) and returns their items.
async function readPages(iterator, n) {
  const items = [];
  let token;
  for (let i = 0; i < n; i++) {
    const res = await iterator.readNext();
    assert(res.statusCode === 200, `change feed page ${i + 1} answered ${res.statusCode}, want 200`);
    items.push(...res.result);
    token = res.continuationToken;
  }
  return { items, token };
}

// admin calls the emulator's admin API (admin.mjs); its errors fail the check like assertions.
const adminCall = adminClient(endpoint, key);
async function admin(method, path, body) {
  try {
    return await adminCall(method, path, body);
  } catch (err) {
    if (err instanceof AdminError) throw new AssertionError(err.message);
    throw err;
  }
}

async function liveRanges(container) {
  const { resources } = await container.readPartitionKeyRanges().fetchAll();
  return resources;
}

function checkTiling(ranges, what) {
  const sorted = [...ranges].sort((a, b) => (a.minInclusive < b.minInclusive ? -1 : 1));
  assert(sorted.length > 0 && sorted[0].minInclusive === "", `${what}: the first range does not start at ""`);
  for (let i = 1; i < sorted.length; i++) {
    assert(sorted[i].minInclusive === sorted[i - 1].maxExclusive, `${what}: gap or overlap at ${sorted[i].minInclusive}`);
  }
  assert(sorted.at(-1).maxExclusive === "FF", `${what}: the last range does not end at "FF"`);
}

async function main() {
  let database;
  await check("database createIfNotExists", async () => {
    const first = await client.databases.createIfNotExists({ id: dbName });
    assert(first.statusCode === 201, `first createIfNotExists answered ${first.statusCode}, want 201`);
    const again = await client.databases.createIfNotExists({ id: dbName });
    assert(again.statusCode === 200, `second createIfNotExists answered ${again.statusCode}, want 200`);
    database = first.database;
    const { resource } = await database.read();
    assert(resource.id === dbName && resource._rid, `database read returned ${JSON.stringify(resource)}`);
    return `201 then 200, _rid ${resource._rid}`;
  });
  if (!database) return;

  let items;
  await check("container createIfNotExists /pk", async () => {
    const first = await database.containers.createIfNotExists({ id: "items", partitionKey: "/pk" });
    assert(first.statusCode === 201, `first createIfNotExists answered ${first.statusCode}, want 201`);
    const again = await database.containers.createIfNotExists({ id: "items", partitionKey: "/pk" });
    assert(again.statusCode === 200, `second createIfNotExists answered ${again.statusCode}, want 200`);
    const pk = again.resource.partitionKey;
    assert(JSON.stringify(pk.paths) === '["/pk"]', `partition key paths ${JSON.stringify(pk.paths)}`);
    items = first.container;
    return `201 then 200, partitionKey ${JSON.stringify(pk)}`;
  });
  if (!items) return;

  await check("item create, read, replace If-Match, stale If-Match 412, delete", async () => {
    const created = await items.items.create({ id: "crud-1", pk: "a", n: 1 });
    assert(created.statusCode === 201, `create answered ${created.statusCode}`);
    assert(created.resource?.id === "crud-1" && created.resource._etag, "create returned no body with id and _etag");
    const etag1 = created.resource._etag;

    const read = await items.item("crud-1", "a").read();
    assert(read.statusCode === 200 && read.resource.n === 1, `read answered ${read.statusCode} ${JSON.stringify(read.resource)}`);
    assert(read.etag === etag1, `read etag ${read.etag}, created ${etag1}`);

    const replaced = await items
      .item("crud-1", "a")
      .replace({ id: "crud-1", pk: "a", n: 2 }, { accessCondition: { type: "IfMatch", condition: etag1 } });
    assert(replaced.statusCode === 200 && replaced.resource.n === 2, `replace answered ${replaced.statusCode}`);
    assert(replaced.etag && replaced.etag !== etag1, "replace did not change the etag");

    const stale = await statusOf(() =>
      items.item("crud-1", "a").replace({ id: "crud-1", pk: "a", n: 3 }, { accessCondition: { type: "IfMatch", condition: etag1 } }),
    );
    assert(stale === 412, `replace with a stale etag answered ${stale}, want 412`);
    const after = await items.item("crud-1", "a").read();
    assert(after.resource.n === 2, `the stale replace changed the item: n=${after.resource.n}`);

    const del = await items.item("crud-1", "a").delete();
    assert(del.statusCode === 204, `delete answered ${del.statusCode}, want 204`);
    const gone = await statusOf(() => items.item("crud-1", "a").read());
    assert(gone === 404, `read after delete answered ${gone}, want 404`);
    return "201, 200, 200 (new etag), 412, 204, 404";
  });

  await check("item read of a missing id is 404", async () => {
    const status = await statusOf(() => items.item("never-written", "a").read());
    assert(status === 404, `answered ${status}, want 404`);
    const wrongPK = await statusOf(async () => {
      await items.items.create({ id: "pk-b", pk: "b" });
      return items.item("pk-b", "a").read();
    });
    assert(wrongPK === 404, `reading an id under another partition key answered ${wrongPK}, want 404`);
    return "404";
  });

  await check("upsert creates then replaces", async () => {
    const a = await items.items.upsert({ id: "up-1", pk: "u", v: 1 });
    const b = await items.items.upsert({ id: "up-1", pk: "u", v: 2 });
    assert(a.statusCode === 201 && b.statusCode === 200, `upserts answered ${a.statusCode}, ${b.statusCode}; want 201, 200`);
    const { resource } = await items.item("up-1", "u").read();
    assert(resource.v === 2, `read after upsert: v=${resource.v}`);
    return "201, 200";
  });

  await check("undefined partition key ([{}])", async () => {
    const created = await items.items.create({ id: "nopk-1", v: 1 });
    assert(created.statusCode === 201, `create answered ${created.statusCode}`);
    const read = await items.item("nopk-1").read();
    assert(read.statusCode === 200 && read.resource?.v === 1, `read with an undefined key answered ${read.statusCode}`);
    const del = await items.item("nopk-1").delete();
    assert(del.statusCode === 204, `delete answered ${del.statusCode}`);
    return "create, read, delete without a pk property";
  });

  // Query data: 13 documents named q-.. over 6 partition keys, plus others.
  const qids = [];
  for (let i = 0; i < 13; i++) {
    const id = `q-${String(i).padStart(2, "0")}`;
    qids.push(id);
    await items.items.create({ id, pk: `p${i % 6}`, i });
  }
  for (let i = 0; i < 4; i++) await items.items.create({ id: `other-${i}`, pk: `p${i}` });
  const querySpec = {
    query: "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)",
    parameters: [{ name: "@prefix", value: "q-" }],
  };

  await check("cross-partition query with parameters, paged by maxItemCount", async () => {
    const it = items.items.query(querySpec, { maxItemCount: 4 });
    const got = [];
    const sizes = [];
    while (it.hasMoreResults()) {
      const { resources } = await it.fetchNext();
      if (resources.length === 0) continue;
      sizes.push(resources.length);
      got.push(...resources.map((d) => d.id));
    }
    noDuplicates(got, "query");
    sameSet(got, qids, "query");
    assert(sizes.every((n) => n <= 4), `a page held more than maxItemCount: ${sizes}`);
    assert(sizes.length >= 4, `13 results in pages of 4 came in ${sizes.length} pages`);
    return `pages ${JSON.stringify(sizes)}`;
  });

  await check("cross-partition query through the query plan (forceQueryPlan)", async () => {
    const { resources } = await items.items.query(querySpec, { maxItemCount: 4, forceQueryPlan: true }).fetchAll();
    const got = resources.map((d) => d.id);
    noDuplicates(got, "query");
    sameSet(got, qids, "query");
    return `${got.length} documents`;
  });

  await check("partition-key-scoped query", async () => {
    const { resources } = await items.items.query(querySpec, { partitionKey: "p1" }).fetchAll();
    sameSet(
      resources.map((d) => d.id),
      qids.filter((_, i) => i % 6 === 1),
      "query on p1",
    );
    return `${resources.length} documents`;
  });

  await check("items.readAll", async () => {
    const { resources } = await items.items.readAll({ maxItemCount: 5 }).fetchAll();
    const want = [...qids, "other-0", "other-1", "other-2", "other-3", "pk-b", "up-1"];
    noDuplicates(resources.map((d) => d.id), "readAll");
    sameSet(resources.map((d) => d.id), want, "readAll");
    return `${resources.length} documents`;
  });

  await check("getFeedRanges", async () => {
    const ranges = await items.getFeedRanges();
    assert(ranges.length === 4, `${ranges.length} feed ranges, want 4 (the emulator's --partitions)`);
    checkTiling(ranges, "feed ranges");
    return ranges.map((r) => `[${r.minInclusive},${r.maxExclusive})`).join(" ");
  });

  await check("ids with spaces, '+' and non-ASCII characters", async () => {
    const id = "a b+é~ü";
    const created = await items.items.create({ id, pk: "odd key/é", v: 1 });
    assert(created.statusCode === 201, `create answered ${created.statusCode}`);
    const read = await items.item(id, "odd key/é").read();
    assert(read.statusCode === 200 && read.resource.id === id, `read answered ${read.statusCode}`);
    const replaced = await items.item(id, "odd key/é").replace({ id, pk: "odd key/é", v: 2 });
    assert(replaced.statusCode === 200 && replaced.resource.v === 2, `replace answered ${replaced.statusCode}`);
    const del = await items.item(id, "odd key/é").delete();
    assert(del.statusCode === 204, `delete answered ${del.statusCode}`);
    return "201, 200, 200, 204";
  });

  await check("hierarchical partition key: full-key reads, prefix query, prefix change feed", async () => {
    const { container: h } = await database.containers.createIfNotExists({
      id: "hierarchical",
      partitionKey: { paths: ["/tenant", "/user"], kind: "MultiHash", version: 2 },
    });
    const docs = [
      ["h1", "t1", "u1"],
      ["h2", "t1", "u2"],
      ["h3", "t2", "u1"],
      ["h4", "t10", "u1"],
    ];
    for (const [id, tenant, user] of docs) await h.items.create({ id, tenant, user });
    const read = await h.item("h2", ["t1", "u2"]).read();
    assert(read.statusCode === 200 && read.resource.id === "h2", `read with the full key answered ${read.statusCode}`);
    const { resources } = await h.items.query("SELECT * FROM c", { partitionKey: ["t1"] }).fetchAll();
    sameSet(resources.map((d) => d.id), ["h1", "h2"], "query on the prefix [t1]");
    const full = await h.items.query("SELECT * FROM c", { partitionKey: ["t1", "u2"] }).fetchAll();
    sameSet(full.resources.map((d) => d.id), ["h2"], "query on the full key [t1, u2]");
    const feed = await drain(h.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(["t1"]) }));
    sameSet(feed.items.map((d) => d.id), ["h1", "h2"], "change feed of the prefix [t1]");
    return "prefix [t1] -> h1, h2";
  });

  await check("429 with x-ms-retry-after-ms is retried", async () => {
    await admin("POST", "/_cfp/faults", { status: 429, retryAfterMs: 20, count: 2 });
    try {
      const read = await items.item("up-1", "u").read();
      assert(read.statusCode === 200, `read answered ${read.statusCode}`);
      const retries = read.diagnostics?.clientSideRequestStatistics?.retryDiagnostics?.failedAttempts?.length;
      assert(retries === 2, `the read was retried ${retries} times, want 2`);
      return `200 after ${retries} throttled attempts`;
    } finally {
      await admin("DELETE", "/_cfp/faults");
    }
  });

  await featureChecks(database);
  await changeFeedChecks(database);
  await splitCheck(database);
  await mergeCheck(database);
  await propertyCheck(database);

  await check("database delete", async () => {
    const del = await database.delete();
    assert(del.statusCode === 204, `delete answered ${del.statusCode}`);
    const status = await statusOf(() => database.read());
    assert(status === 404, `read after delete answered ${status}, want 404`);
    return "204, then 404";
  });
}

async function featureChecks(database) {
  await check("TLS on the same port, trusting the exported certificate", async () => {
    const certFile = process.env.CFP_EMULATOR_CERT;
    assert(certFile, "CFP_EMULATOR_CERT is not set");
    const tlsEndpoint = endpoint.replace(/^http:/, "https:");
    const tls = new CosmosClient({ endpoint: tlsEndpoint, key, agent: new Agent({ ca: readFileSync(certFile) }) });
    const { resource } = await tls.database(database.id).read();
    assert(resource.id === database.id, `read ${resource.id} over TLS`);
    const pem = await (await fetch(endpoint + "_explorer/emulator.pem")).text();
    assert(pem === readFileSync(certFile, "utf8"), "/_explorer/emulator.pem differs from the exported file");
    tls.dispose();
    return tlsEndpoint;
  });

  const { container: feat } = await database.containers.createIfNotExists({ id: "features", partitionKey: "/pk" });
  await check("patch: incr, add, remove, and a failed condition is 412", async () => {
    await feat.items.create({ id: "p1", pk: "a", v: 1, gone: true });
    const { resource } = await feat.item("p1", "a").patch([
      { op: "incr", path: "/v", value: 2 },
      { op: "add", path: "/tags", value: ["x"] },
      { op: "remove", path: "/gone" },
    ]);
    assert(resource.v === 3 && resource.tags[0] === "x" && resource.gone === undefined, `patched ${JSON.stringify(resource)}`);
    const status = await statusOf(() =>
      feat.item("p1", "a").patch({ condition: "FROM c WHERE c.v > 10", operations: [{ op: "set", path: "/v", value: 0 }] }),
    );
    assert(status === 412, `conditional patch answered ${status}, want 412`);
    return "v 1 -> 3";
  });

  await check("transactional batch: all or nothing", async () => {
    const ok = await feat.items.batch(
      [
        { operationType: "Create", resourceBody: { id: "b1", pk: "b" } },
        { operationType: "Upsert", resourceBody: { id: "b2", pk: "b" } },
        { operationType: "Read", id: "b1" },
      ],
      "b",
    );
    const codes = ok.result.map((r) => r.statusCode).join(",");
    assert(codes === "201,201,200", `batch answered ${codes}`);
    const failed = await feat.items.batch(
      [
        { operationType: "Delete", id: "b2" },
        { operationType: "Create", resourceBody: { id: "b1", pk: "b" } },
      ],
      "b",
    );
    const fcodes = failed.result.map((r) => r.statusCode).join(",");
    assert(fcodes === "424,409", `failing batch answered ${fcodes}, want 424,409`);
    const still = await feat.item("b2", "b").read();
    assert(still.statusCode === 200, "the delete of the failed batch was not undone");
    return `${codes}; then ${fcodes}`;
  });

  await check("stored procedure: its writes commit together or not at all", async () => {
    await feat.scripts.storedProcedures.create({
      id: "two",
      body: `function (a, b, fail) {
        var c = getContext().getCollection();
        c.createDocument(c.getSelfLink(), { id: a, pk: "s" });
        c.createDocument(c.getSelfLink(), { id: b, pk: "s" }, function (err) {
          if (err) throw err;
          if (fail) throw new Error("asked to fail");
          getContext().getResponse().setBody(a + "+" + b);
        });
      }`,
    });
    const ok = await feat.scripts.storedProcedure("two").execute("s", ["s1", "s2", false]);
    assert(ok.resource === "s1+s2", `execute answered ${JSON.stringify(ok.resource)}`);
    const code = await statusOf(() => feat.scripts.storedProcedure("two").execute("s", ["s3", "s4", true]));
    assert(code === 400, `a procedure that throws answered ${code}, want 400`);
    for (const id of ["s3", "s4"]) {
      const r = await feat.item(id, "s").read();
      assert(r.statusCode === 404, `${id} of the failed procedure: ${r.statusCode}, want 404 (rolled back)`);
    }
    const { resources } = await feat.scripts.storedProcedures.readAll().fetchAll();
    assert(resources.some((p) => p.id === "two"), "readAll lists no procedure 'two'");
    return `${ok.resource}; then ${code}, nothing written`;
  });

  await check("pre-trigger and user-defined function", async () => {
    await feat.scripts.triggers.create({
      id: "stamp",
      triggerType: "Pre",
      triggerOperation: "All",
      body: `function () { var d = getContext().getRequest().getBody(); d.sq = d.v * 10; getContext().getRequest().setBody(d); }`,
    });
    await feat.scripts.userDefinedFunctions.create({ id: "sq", body: "function (x) { return x * x; }" });
    for (let v = 1; v <= 3; v++) await feat.items.create({ id: `u${v}`, pk: "u", v }, { preTriggerInclude: ["stamp"] });
    const { resources } = await feat.items
      .query({ query: "SELECT VALUE [c.sq, udf.sq(c.v)] FROM c WHERE c.pk = 'u'" }, { partitionKey: "u" })
      .fetchAll();
    const got = JSON.stringify(resources.sort());
    assert(got === "[[10,1],[20,4],[30,9]]", `query answered ${got}`);
    return got;
  });

  await check("resource token: a Read permission reads its container and writes nothing", async () => {
    await feat.items.upsert({ id: "r1", pk: "r" });
    const { user } = await database.users.upsert({ id: "reader" });
    const { resource: perm } = await user.permissions.upsert({
      id: "read-features",
      permissionMode: "Read",
      resource: feat.url,
    });
    assert(perm._token, "the permission has no _token");
    const restricted = new CosmosClient({ endpoint, resourceTokens: { [feat.url]: perm._token } });
    const c = restricted.database(database.id).container(feat.id);
    const { resource } = await c.item("r1", "r").read();
    assert(resource?.id === "r1", `read with the token: ${JSON.stringify(resource)}`);
    const code = await statusOf(() => c.items.create({ id: "r2", pk: "r" }));
    assert(code === 403, `a create with a Read token answered ${code}, want 403`);
    restricted.dispose();
    return `read 200, create ${code}`;
  });

  await check("items.bulk over several partition keys: create, upsert, replace, read, delete, a 409", async () => {
    const { container: c } = await database.containers.createIfNotExists({ id: "bulk", partitionKey: "/pk" });
    const ops = [];
    for (let i = 0; i < 30; i++) ops.push({ operationType: "Create", resourceBody: { id: `b-${i}`, pk: `p${i % 7}`, v: i } });
    const created = await c.items.bulk(ops);
    assert(created.length === 30, `${created.length} results for 30 operations`);
    const codes = created.map((r) => r.statusCode);
    assert(codes.every((s) => s === 201), `create statuses ${JSON.stringify(codes)}`);
    const mixed = await c.items.bulk(
      [
        { operationType: "Upsert", resourceBody: { id: "b-0", pk: "p0", v: 100 } },
        { operationType: "Upsert", resourceBody: { id: "b-new", pk: "p9", v: 1 } },
        { operationType: "Replace", id: "b-1", partitionKey: "p1", resourceBody: { id: "b-1", pk: "p1", v: 101 } },
        { operationType: "Read", id: "b-2", partitionKey: "p2" },
        { operationType: "Delete", id: "b-3", partitionKey: "p3" },
        { operationType: "Create", resourceBody: { id: "b-4", pk: "p4", v: 0 } },
      ],
      { continueOnError: true },
    );
    const got = mixed.map((r) => r.statusCode);
    assert(JSON.stringify(got) === "[200,201,200,200,204,409]", `statuses ${JSON.stringify(got)}, want [200,201,200,200,204,409]`);
    assert(mixed[3].resourceBody?.v === 2, `bulk read returned ${JSON.stringify(mixed[3].resourceBody)}`);
    const { resources } = await c.items.query("SELECT c.id, c.v FROM c", { maxItemCount: 7 }).fetchAll();
    const byId = Object.fromEntries(resources.map((d) => [d.id, d.v]));
    assert(resources.length === 30, `${resources.length} documents after the bulk calls, want 30`);
    assert(byId["b-0"] === 100 && byId["b-1"] === 101 && byId["b-new"] === 1 && !("b-3" in byId), `documents ${JSON.stringify(byId)}`);
    return `30 creates 201; ${JSON.stringify(got)}`;
  });

  await check("items.executeBulkOperations over several partition keys", async () => {
    const { container: c } = await database.containers.createIfNotExists({ id: "bulk2", partitionKey: "/pk" });
    const ops = [];
    // executeBulkOperations wants every operation's partition key spelled out.
    for (let i = 0; i < 40; i++) {
      ops.push({ operationType: "Create", partitionKey: `p${i % 9}`, resourceBody: { id: `e-${i}`, pk: `p${i % 9}`, v: i } });
    }
    ops.push({ operationType: "Create", partitionKey: "p0", resourceBody: { id: "e-0", pk: "p0", v: -1 } });
    ops.push({ operationType: "Patch", id: "e-5", partitionKey: "p5", resourceBody: { operations: [{ op: "incr", path: "/v", value: 10 }] } });
    const results = await c.items.executeBulkOperations(ops);
    assert(results.length === ops.length, `${results.length} results for ${ops.length} operations`);
    const status = (r) => r.response?.statusCode ?? r.error?.code;
    const creates = results.slice(0, 40).map(status);
    assert(creates.every((s) => s === 201), `create statuses ${JSON.stringify(creates)}`);
    assert(status(results[40]) === 409, `creating e-0 again answered ${status(results[40])}, want 409`);
    assert(status(results[41]) === 200, `patch answered ${status(results[41])}, want 200`);
    const { resource } = await c.item("e-5", "p5").read();
    assert(resource.v === 15, `e-5 after the patch: v=${resource.v}, want 15`);
    const { resource: first } = await c.item("e-0", "p0").read();
    assert(first.v === 0, `the failed create changed e-0: v=${first.v}`);
    const { resources } = await c.items.query("SELECT VALUE COUNT(1) FROM c").fetchAll();
    assert(resources[0] === 40, `COUNT after the bulk: ${resources[0]}, want 40`);
    return `40 creates 201, a 409, a patch 200`;
  });

  await check("offers: manual throughput read and replaced", async () => {
    const { container: thr } = await database.containers.createIfNotExists({ id: "throughput", partitionKey: "/pk", throughput: 400 });
    const { resource: offer } = await thr.readOffer();
    assert(offer?.content?.offerThroughput === 400, `offer ${JSON.stringify(offer)}`);
    const { resource: replaced } = await client.offer(offer.id).replace({ ...offer, content: { offerThroughput: 600 } });
    assert(replaced.content.offerThroughput === 600, `replaced offer ${JSON.stringify(replaced)}`);
    return "400 -> 600 RU/s";
  });

  await check("aggregates within a partition key", async () => {
    for (let i = 0; i < 4; i++) await feat.items.upsert({ id: `g${i}`, pk: "g", n: i });
    const got = {};
    for (const fn of ["COUNT(1)", "SUM(c.n)", "MIN(c.n)", "MAX(c.n)", "AVG(c.n)"]) {
      const { resources } = await feat.items.query(`SELECT VALUE ${fn} FROM c`, { partitionKey: "g" }).fetchAll();
      got[fn] = resources[0];
    }
    const s = JSON.stringify(got);
    assert(s === '{"COUNT(1)":4,"SUM(c.n)":6,"MIN(c.n)":0,"MAX(c.n)":3,"AVG(c.n)":1.5}', s);
    return s;
  });
}

async function changeFeedChecks(database) {
  const { container: feed } = await database.containers.createIfNotExists({ id: "feed", partitionKey: "/pk" });
  const ids = [];
  for (let i = 0; i < 20; i++) {
    const id = `f-${String(i).padStart(2, "0")}`;
    ids.push(id);
    await feed.items.create({ id, pk: `k${i % 7}`, v: 1 });
  }
  await feed.item("f-03", "k3").replace({ id: "f-03", pk: "k3", v: 2 });
  await feed.item("f-05", "k5").delete();
  const live = ids.filter((id) => id !== "f-05");

  await check("change feed from Beginning: every live document once, at its latest version", async () => {
    const it = feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 4 });
    const { items, pages } = await drain(it);
    const got = items.map((d) => d.id);
    noDuplicates(got, "change feed");
    sameSet(got, live, "change feed");
    const f03 = items.find((d) => d.id === "f-03");
    assert(f03.v === 2, `f-03 came at version ${f03.v}, want its latest (2)`);
    return `${got.length} documents in ${pages} pages`;
  });

  await check("change feed from Now: only what is written after", async () => {
    const it = feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now() });
    const first = await drain(it);
    assert(first.items.length === 0, `from Now delivered ${first.items.length} old documents`);
    await feed.items.create({ id: "g-1", pk: "k1", v: 1 });
    await feed.item("f-07", "k0").replace({ id: "f-07", pk: "k0", v: 2 });
    const second = await drain(it);
    sameSet(
      second.items.map((d) => d.id),
      ["g-1", "f-07"],
      "from Now after two writes",
    );
    noDuplicates(second.items.map((d) => d.id), "from Now");
    return "304, then exactly the 2 new changes";
  });
  live.push("g-1");

  await check("change feed from a continuation token: the rest, once", async () => {
    const it = feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 3 });
    const head = await readPages(it, 3);
    const token = JSON.parse(head.token);
    assert(token.rid && token.Continuation?.length === 4, `continuation token ${head.token}`);
    const resumed = feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(head.token), maxItemCount: 3 });
    const rest = await drain(resumed);
    const all = [...head.items, ...rest.items].map((d) => d.id);
    noDuplicates(all, "first pages + resumed");
    sameSet(all, live, "first pages + resumed");
    const again = await drain(feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(rest.token) }));
    assert(again.items.length === 0, `resuming from the final token delivered ${again.items.length} documents again`);
    return `${head.items.length} before the token, ${rest.items.length} after`;
  });

  await check("partition-key-scoped change feed", async () => {
    const it = feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning("k1"), maxItemCount: 2 });
    const { items } = await drain(it);
    const want = ["f-01", "f-08", "f-15", "g-1"];
    noDuplicates(items.map((d) => d.id), "k1 change feed");
    sameSet(items.map((d) => d.id), want, "k1 change feed");
    await feed.items.create({ id: "g-2", pk: "k1" });
    await feed.items.create({ id: "g-3", pk: "k2" });
    const next = await drain(it);
    sameSet(next.items.map((d) => d.id), ["g-2"], "k1 change feed after writes to k1 and k2");
    return `${items.length} documents of k1, then g-2 only`;
  });

  await check("partition-key-scoped change feed resumed from its continuation token", async () => {
    const it = feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning("k4"), maxItemCount: 1 });
    const head = await readPages(it, 1);
    const rest = await drain(feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(head.token) }));
    const got = [...head.items, ...rest.items].map((d) => d.id);
    noDuplicates(got, "k4 change feed");
    sameSet(got, ["f-04", "f-11", "f-18"], "k4 change feed, first page + resumed");
    return `${head.items.length} + ${rest.items.length}`;
  });

  await check("change feed from a point in time (If-Modified-Since)", async () => {
    // _ts and If-Modified-Since have whole seconds: write, cross a second boundary twice, note
    // the time, write again.
    await feed.items.create({ id: "t-old", pk: "t" });
    await new Promise((r) => setTimeout(r, 2100 - (Date.now() % 1000)));
    const since = new Date();
    await new Promise((r) => setTimeout(r, 1100));
    await feed.items.create({ id: "t-new", pk: "t" });
    const whole = await drain(feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Time(since) }));
    sameSet(whole.items.map((d) => d.id), ["t-new"], "whole container since the time");
    const scoped = await drain(feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Time(since, "t") }));
    sameSet(scoped.items.map((d) => d.id), ["t-new"], "partition key t since the time");
    return `since ${since.toISOString()}: t-new only`;
  });

  await check("change feed of one feed range", async () => {
    const ranges = await feed.getFeedRanges();
    const seen = [];
    for (const r of ranges) {
      const { items } = await drain(feed.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(r) }));
      seen.push(...items.map((d) => d.id));
    }
    noDuplicates(seen, "per feed range");
    sameSet(seen, [...live, "g-2", "g-3", "t-old", "t-new"], "union of the feed ranges");
    return `${ranges.length} ranges, ${seen.length} documents`;
  });
}

// propertyCheck runs property.mjs's generated queries (CFP_JSSDK_SEED, default the time;
// CFP_JSSDK_QUERIES, default 300) through the SDK; the detail lists the refusals by shape and,
// on a failure, the seed and the first mismatching queries.
async function propertyCheck(database) {
  await check("property: generated queries through the SDK match a JavaScript evaluation", async () => {
    const seed = Number(process.env.CFP_JSSDK_SEED || Date.now() % 2 ** 31);
    const count = Number(process.env.CFP_JSSDK_QUERIES || 300);
    const res = await runProperty(database, admin, { seed, count, docs: 150 });
    const sum = (o) => Object.values(o).reduce((s, n) => s + n, 0);
    const list = (o) =>
      Object.entries(o)
        .sort((a, b) => b[1] - a[1])
        .map(([shape, n]) => `${n} ${shape}`)
        .join("; ") || "none";
    const summary =
      `seed ${seed}: ${res.queries} queries over ${res.partitions} partitions, ${res.matched} matched, ` +
      `${sum(res.refused)} refused by the emulator (${list(res.refused)}), ` +
      `${sum(res.sdkRefused)} refused by the SDK's merge (${list(res.sdkRefused)}), ` +
      `${sum(res.sdkDefects)} lost falsy DISTINCT values in the SDK (${list(res.sdkDefects)}), ` +
      `${res.mismatches.length} mismatched`;
    if (res.mismatches.length) {
      const shown = res.mismatches.slice(0, 5).map((m) => `\n  #${m.index} [${m.shape}] ${m.query}\n    ${m.how}`);
      throw new AssertionError(`${summary} (replay: CFP_JSSDK_SEED=${seed})${shown.join("")}`);
    }
    return summary;
  });
}

// splitCheck splits two of 4 partitions in the middle of a change-feed read: one the iterator
// has partly read (its continuation goes to the children) and one it has not read yet.
async function splitCheck(database) {
  await check("split in the middle of a change-feed read (4 partitions)", async () => {
    const { container: c } = await database.containers.createIfNotExists({ id: "split", partitionKey: "/pk" });
    const before = await liveRanges(c);
    assert(before.length === 4, `the container has ${before.length} partitions, want 4`);
    const want = [];
    for (let i = 0; i < 40; i++) {
      want.push(`s-${i}`);
      await c.items.create({ id: `s-${i}`, pk: `p${i}` });
    }
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 3 });
    const head = await readPages(it, 2);
    // The first page came from the first range in the iterator's queue; split it and the last.
    const byMin = [...before].sort((a, b) => (a.minInclusive < b.minInclusive ? -1 : 1));
    const split1 = await admin("POST", "/_cfp/split", { db: database.id, coll: "split", range: byMin[0].id });
    const split2 = await admin("POST", "/_cfp/split", { db: database.id, coll: "split", range: byMin[3].id });
    assert(split1.children?.length === 2 && split2.children?.length === 2, "a split did not return two children");
    for (let i = 40; i < 50; i++) {
      want.push(`s-${i}`);
      await c.items.create({ id: `s-${i}`, pk: `p${i}` });
    }
    const rest = await drain(it);
    const got = [...head.items, ...rest.items].map((d) => d.id);
    noDuplicates(got, "across the split");
    sameSet(got, want, "across the split");

    const after = await liveRanges(c);
    assert(after.length === 6, `${after.length} live ranges after two splits, want 6`);
    checkTiling(after, "ranges after the split");
    const children = after.filter((r) => (r.parents ?? []).length > 0);
    assert(children.length === 4, `${children.length} ranges carry parents, want 4`);
    const feedRanges = await c.getFeedRanges();
    assert(feedRanges.length === 6, `getFeedRanges after the split: ${feedRanges.length}, want 6`);
    const token = JSON.parse(rest.token);
    assert(token.Continuation.length === 6, `the continuation token after the split covers ${token.Continuation.length} ranges, want 6`);

    await c.items.create({ id: "s-late", pk: "late" });
    const late = await drain(it);
    sameSet(late.items.map((d) => d.id), ["s-late"], "after the split");
    return `split ${byMin[0].id} -> ${split1.children}, ${byMin[3].id} -> ${split2.children}; ${got.length} documents once`;
  });
}

// mergeCheck merges two partitions mid-read and resumes a token taken before the merge: the
// merged partition is read per old sub-range, with x-ms-start-epk/x-ms-end-epk.
async function mergeCheck(database) {
  await check("merge in the middle of a change-feed read, and a token from before it", async () => {
    const { container: c } = await database.containers.createIfNotExists({ id: "merge", partitionKey: "/pk" });
    const before = await liveRanges(c);
    assert(before.length === 4, `the container has ${before.length} partitions, want 4`);
    const want = [];
    for (let i = 0; i < 30; i++) {
      want.push(`m-${i}`);
      await c.items.create({ id: `m-${i}`, pk: `p${i}` });
    }
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 3 });
    const head = await readPages(it, 2);
    const byMin = [...before].sort((a, b) => (a.minInclusive < b.minInclusive ? -1 : 1));
    const merged = await admin("POST", "/_cfp/merge", { db: database.id, coll: "merge", ranges: [byMin[0].id, byMin[1].id] });
    assert(merged.merged, "merge returned no partition");
    for (let i = 30; i < 40; i++) {
      want.push(`m-${i}`);
      await c.items.create({ id: `m-${i}`, pk: `p${i}` });
    }
    const rest = await drain(it);
    const got = [...head.items, ...rest.items].map((d) => d.id);
    noDuplicates(got, "across the merge");
    sameSet(got, want, "across the merge");
    const after = await liveRanges(c);
    assert(after.length === 3, `${after.length} live ranges after the merge, want 3`);
    checkTiling(after, "ranges after the merge");

    // The final token still names the 4 old ranges: resumed, each old half of the merged
    // partition is read with its own continuation and EPK bounds.
    await c.items.create({ id: "m-late-1", pk: "late-1" });
    await c.items.create({ id: "m-late-2", pk: "late-2" });
    await c.items.create({ id: "m-late-3", pk: "late-3" });
    const resumed = await drain(c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(rest.token) }));
    noDuplicates(resumed.items.map((d) => d.id), "resumed after the merge");
    sameSet(resumed.items.map((d) => d.id), ["m-late-1", "m-late-2", "m-late-3"], "resumed after the merge");
    return `merged ${byMin[0].id}+${byMin[1].id} -> ${merged.merged}; ${got.length} documents once, then 3 new ones`;
  });
}

try {
  await main();
} catch (err) {
  checks.push({ name: "script", ok: false, detail: describe(err) });
} finally {
  client.dispose();
}
const failed = checks.filter((c) => !c.ok).length;
console.log(JSON.stringify({ sdk: sdkVersion, database: dbName, passed: checks.length - failed, failed, checks }, null, 2));
process.exit(failed === 0 ? 0 : 1);
