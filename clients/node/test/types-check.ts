// Compiled by `npm run typecheck` (tsc --noEmit), never run: it uses the library as an
// application would, so index.d.ts must accept it; the @ts-expect-error lines must fail.
import {
  ChangeFeedProcessor, ChangeFeedError, EngineError, OptionsError, ProcessExitedError, estimate,
  type BatchContext, type Estimate, type Lease, type Summary,
} from '@cfp-dev/changefeed';
import cfp from '@cfp-dev/changefeed';

interface Order { id: string; customerId: string; total: number }

async function main(): Promise<void> {
  const p = new ChangeFeedProcessor<Order>({
    endpoint: 'http://127.0.0.1:8081/', key: 'k', database: 'shop', container: 'orders',
    processor: 'orders-proj', instance: 'a', leaseContainer: 'leases', startFrom: new Date(),
    mode: 'latest', manualCheckpoint: true, leaseAcquireInterval: 500, pollInterval: '1s',
  });
  p.onChanges(async (changes: Order[], ctx: BatchContext) => {
    const sum: number = changes.reduce((s, o) => s + o.total, 0);
    if (sum > 0 && ctx.attempt === 1) await ctx.checkpoint();
    const lease: string = ctx.lease;
    void lease;
  })
    .onLeaseAcquired((l: Lease) => { void l.range?.min; })
    .onLeaseReleased(async (l, reason) => { void reason; void l.token; })
    .onLeaseLost(() => {})
    .onError((err) => {
      if (err instanceof ProcessExitedError) void err.exitCode;
      if (err instanceof EngineError) void err.permanent;
    });
  const hello = await p.start();
  void hello.owner;
  const s: Summary | null = await p.stop();
  void s?.processed;
  const e: Estimate = await estimate({ local: true, database: 'shop', container: 'orders', processor: 'orders-proj' });
  for (const l of e.leases) void l.lag;
  void (cfp.ChangeFeedProcessor === ChangeFeedProcessor);
  void new ChangeFeedError('x');
  const bad: ChangeFeedError = new OptionsError('no account');
  void bad;
  // @ts-expect-error: database is required
  void new ChangeFeedProcessor({ container: 'orders', processor: 'p' });
  // @ts-expect-error: mode is latest or all-versions
  void new ChangeFeedProcessor({ database: 'd', container: 'c', processor: 'p', mode: 'full' });
}
void main;
