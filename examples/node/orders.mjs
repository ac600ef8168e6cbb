// Processes the orders `cfp demo` writes (database demo, container orders) with a change feed
// processor in this Node.js process: docs/user-guide.md, "From Node.js".
//
//   COSMOS_ENDPOINT  the account (default http://localhost:8081/, a `cfp emulator`)
//   COSMOS_KEY       its key (a `cfp emulator` on loopback needs none)
//   --until-caught-up  stop by itself once the lag of every lease is 0 (else run until Ctrl-C)
//
// Run two of them at once (each with its own --instance, or none) and they share the leases.
import { ChangeFeedProcessor, estimate } from '@cfp-dev/changefeed';

const untilCaughtUp = process.argv.includes('--until-caught-up');
const account = {
  endpoint: process.env.COSMOS_ENDPOINT || 'http://localhost:8081/',
  key: process.env.COSMOS_KEY,
  database: 'demo',
  container: 'orders',
  processor: 'orders-node',
};

const processor = new ChangeFeedProcessor({
  ...account,
  leaseContainer: 'leases',
  startFrom: 'beginning',
  createLeaseContainer: true,
  stderr: 'ignore',
});

let orders = 0;
let revenue = 0;
processor.onChanges(async (changes, ctx) => {
  for (const order of changes) {
    orders++;
    revenue += order.total;
    console.log(`${order.id}  ${order.customer}  ${order.status.padEnd(9)} ${order.total.toFixed(2).padStart(8)}  (lease ${ctx.lease})`);
  }
});
processor.onLeaseAcquired((lease) => console.error(`acquired lease ${lease.token}`));
processor.onLeaseReleased((lease, reason) => console.error(`released lease ${lease.token} (${reason})`));
processor.onError((err) => {
  console.error(`error: ${err.message}`);
  if (err.name === 'ProcessExitedError') process.exitCode = 1;
});

async function shutdown() {
  const summary = await processor.stop();
  console.error(`${orders} orders, ${revenue.toFixed(2)} in all; cfp processed ${summary?.processed ?? 0} changes`);
}

// Signals are the application's: stop gracefully, so the leases are released at once.
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);

const { owner } = await processor.start();
console.error(`processing demo/orders as ${owner}`);

if (untilCaughtUp) {
  for (;;) {
    await new Promise((r) => setTimeout(r, 2000));
    const lag = await estimate(account);
    if (orders > 0 && lag.summary.total_lag === 0) break;
  }
  process.removeAllListeners('SIGINT');
  await shutdown();
}
