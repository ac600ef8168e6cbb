// The Node.js side of bench/nodebench: a ChangeFeedProcessor whose handler does nothing but
// count, from the beginning of bench/docs, until it has seen BENCH_DOCS changes; then it prints
// one JSON line {items, batches, ms} (ms from this process's start) and stops. With
// BENCH_TOUCH=1 the handler also reads one field (id) of every change.
import { ChangeFeedProcessor } from '../../clients/node/index.mjs';

const started = performance.timeOrigin;
const want = Number(process.env.BENCH_DOCS);
const p = new ChangeFeedProcessor({
  endpoint: process.env.BENCH_ENDPOINT,
  database: 'bench', container: 'docs', processor: process.env.BENCH_PROCESSOR,
  startFrom: 'beginning', createLeaseContainer: true, batchSize: Number(process.env.BENCH_PAGE),
  leaseAcquireInterval: '1s', pollInterval: '100ms', cfpPath: process.env.CFP_PATH, stderr: 'ignore',
});
const touch = process.env.BENCH_TOUCH === '1';
let items = 0;
let missing = 0;
let batches = 0;
let first = 0;
let done;
const finished = new Promise((r) => { done = r; });
p.onChanges(async (changes) => {
  if (!first) first = Date.now() - started;
  if (touch) for (const c of changes) if (typeof c.id !== 'string') missing++;
  items += changes.length;
  batches++;
  if (items >= want) done(Date.now() - started);
});
p.onError((err) => { console.error(err.message); process.exit(1); });
await p.start();
const ms = await finished;
process.stdout.write(JSON.stringify({ items, batches, ms, first, missing }) + '\n');
await p.stop();
