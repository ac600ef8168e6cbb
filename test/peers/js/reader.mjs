// A change feed reader on @azure/cosmos (JavaScript has no change feed processor).
//
// Reads a container's change feed per feed range, from the beginning on its first run and from
// the continuations it saved on later ones, until every range is caught up (304), then saves
// the continuations and exits. Each change is printed to stdout as one JSON line:
// {"id", "pk", "lsn", "range"} (range: the index of the feed range it was read from).
//
//   COSMOS_KEY=... node reader.mjs --endpoint URL --database DB --container C --state FILE
//
// TLS trust comes from NODE_EXTRA_CA_CERTS (the emulator's certificate): verification stays
// on. The key is read from COSMOS_KEY and never printed.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ChangeFeedStartFrom, CosmosClient } from "@azure/cosmos";

const { values: args } = parseArgs({
  options: {
    endpoint: { type: "string" },
    database: { type: "string" },
    container: { type: "string" },
    state: { type: "string" },
  },
});
for (const name of ["endpoint", "database", "container", "state"]) {
  if (!args[name]) {
    console.error(`reader: --${name} is required`);
    process.exit(2);
  }
}

const client = new CosmosClient({ endpoint: args.endpoint, key: process.env.COSMOS_KEY });
const container = client.database(args.database).container(args.container);

let state;
if (existsSync(args.state)) {
  state = JSON.parse(readFileSync(args.state, "utf8"));
} else {
  const ranges = await container.getFeedRanges();
  state = { ranges: ranges.map((feedRange) => ({ feedRange, continuation: null })) };
}

for (const [i, r] of state.ranges.entries()) {
  const from = r.continuation === null
    ? ChangeFeedStartFrom.Beginning(r.feedRange)
    : ChangeFeedStartFrom.Continuation(r.continuation);
  const it = container.items.getChangeFeedIterator({ changeFeedStartFrom: from });
  while (it.hasMoreResults) {
    const page = await it.readNext();
    // The continuation covers the range (its children after a split); 304: caught up.
    r.continuation = page.continuationToken;
    if (page.statusCode === 304) break;
    for (const doc of page.result) {
      process.stdout.write(JSON.stringify({ id: doc.id, pk: doc.pk, lsn: doc._lsn, range: i }) + "\n");
    }
  }
  writeFileSync(args.state + ".tmp", JSON.stringify(state));
  renameSync(args.state + ".tmp", args.state);
}
console.error(`read ${state.ranges.length} feed ranges`);
