// The library against a served `cfp emulator`: application processes and cfp hosts sharing
// one lease set, manual checkpoints, backpressure, stop() and takeover, a dying child, the
// estimator. Figures (changes, duplicates, takeover times) are printed as test diagnostics.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  BinaryNotFoundError, ChangeFeedProcessor, EngineError, ProcessExitedError, estimate,
} from '../index.mjs';
import {
  cfp, cfpBinary, freePort, metric, readHandled, startEmulator, tempDir, until, writeOrders,
} from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const DB = 'shop';
// Short lease timings so that balancing and takeovers happen within seconds.
const timings = { leaseAcquireInterval: '500ms', leaseRenewInterval: '1s', leaseExpiration: '8s', pollInterval: '100ms' };

let emu;
let cfpPath;
let work;

before(async () => {
  cfpPath = await cfpBinary();
  emu = await startEmulator();
  work = tempDir();
});

// Processors a failed test left running are stopped before the emulator, so they do not
// flood the output with errors about an emulator that is gone.
const started = new Set();
class Tracked extends ChangeFeedProcessor {
  start() {
    started.add(this);
    return super.start();
  }
}

after(async () => {
  const stopped = [...started].map((p) => p.stop().catch(() => {}));
  await Promise.race([Promise.all(stopped), new Promise((r) => setTimeout(r, 10000))]);
  if (emu) await emu.stop();
});

function base(container, processor, extra = {}) {
  return {
    endpoint: emu.endpoint, key: emu.key, database: DB, container, processor, cfpPath,
    startFrom: 'beginning', createLeaseContainer: true, stderr: 'ignore', ...timings, ...extra,
  };
}

async function leaseList(container, processor) {
  return JSON.parse(await cfp(emu, 'leases', 'list', '-d', DB, '-c', container, '-p', processor, '-o', 'json'));
}

/** Starts test/fixtures/app.mjs as its own process; resolves once its processor started. */
async function startApp(name, opts, out, delay = 0) {
  const log = fs.openSync(path.join(work, `${name}.stderr`), 'a');
  const child = spawn(process.execPath, [path.join(here, 'fixtures', 'app.mjs')], {
    env: { ...process.env, CFP_TEST_OPTS: JSON.stringify(opts), CFP_TEST_OUT: out, CFP_TEST_DELAY: String(delay) },
    stdio: ['ignore', 'pipe', log],
  });
  const lines = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await until(`${name} started`, () => lines.some((l) => l.event === 'started'), 60000);
  return { child, lines, exited, name };
}

function idsOf(records) {
  return records.map((r) => r.id);
}

function counts(ids) {
  const m = new Map();
  for (const id of ids) m.set(id, (m.get(id) || 0) + 1);
  return m;
}

test('two Node processes and a cfp host share one lease set across a split and a kill -9', async (t) => {
  const container = 'shared';
  const processor = 'shared';
  await writeOrders(emu, DB, container, 0, 200);
  const outs = { 'node-1': path.join(work, 'node-1.jsonl'), 'node-2': path.join(work, 'node-2.jsonl') };
  const cfpOut = path.join(work, 'cfp-1.jsonl');

  // node-1 is slow (small batches, 20 ms each after recording them), so that its kill -9
  // lands on batches handled but not yet answered.
  const app1 = await startApp('node-1', base(container, processor, { instance: 'node-1', batchSize: 5 }), outs['node-1'], 20);
  // The cfp host: the stdout delegate, one line per change.
  const host = spawn(cfpPath, ['--endpoint', emu.endpoint, 'process', '-d', DB, '-c', container, '-p', processor,
    '--instance', 'cfp-1', '--from', 'beginning', '--lease-acquire-interval', '500ms', '--lease-renew-interval', '1s',
    '--lease-expiration', '8s', '--poll-interval', '100ms', '--events-file', path.join(work, 'cfp-1.events')], {
    env: { ...process.env, COSMOS_KEY: emu.key },
    stdio: ['ignore', fs.openSync(cfpOut, 'w'), fs.openSync(path.join(work, 'cfp-1.stderr'), 'w')],
  });
  const hostExited = new Promise((resolve) => host.on('exit', (code, signal) => resolve({ code, signal })));
  const app2 = await startApp('node-2', base(container, processor, { instance: 'node-2' }), outs['node-2']);

  const handled = () => [
    ...readHandled(outs['node-1']), ...readHandled(outs['node-2']),
    ...readHandled(cfpOut).map((d) => ({ id: d.id, host: 'cfp-1' })),
  ];
  const seenAll = (n) => () => {
    const c = counts(idsOf(handled()));
    for (let i = 0; i < n; i++) if (!c.has(`o${i}`)) return false;
    return true;
  };
  await until('the first 200 orders', seenAll(200));
  await until('three hosts holding leases', async () => {
    const owners = new Set((await leaseList(container, processor)).map((l) => l.owner).filter(Boolean));
    return owners.size === 3;
  });

  // A split of partition 0: its lease is replaced by two children, which the hosts share.
  const before = (await leaseList(container, processor)).length;
  await cfp(emu, 'emulator', 'split', '-d', DB, '-c', container, '--range', '0', '-o', 'json');
  await writeOrders(emu, DB, container, 200, 200);
  await until('400 orders after the split', seenAll(400));
  await until('the children leases', async () => (await leaseList(container, processor)).length === before + 1);

  // kill -9 of an application process: its cfp sees the end of its stdin, stops and releases
  // its leases; the other hosts take them over.
  // The kill lands while the new orders are being handled: a batch in flight then is not
  // checkpointed and comes again elsewhere (a duplicate, never a loss).
  await writeOrders(emu, DB, container, 400, 200);
  await until('node-1 handling the new orders', () => readHandled(outs['node-1']).some((r) => Number(r.id.slice(1)) >= 400), 30000)
    .catch(() => {}); // node-1 may hold none of their leases: kill it anyway
  const killedAt = Date.now();
  app1.child.kill('SIGKILL');
  await app1.exited;
  await until('600 orders after the kill', seenAll(600));
  await until('no lease owned by the killed process', async () => {
    const ls = await leaseList(container, processor);
    return ls.every((l) => l.owner && l.owner !== 'node-1');
  });
  const takeover = Date.now() - killedAt;

  // Graceful stops: node-2 on SIGTERM (its own handler calls stop()), cfp on SIGINT.
  app2.child.kill('SIGTERM');
  host.kill('SIGINT');
  assert.deepEqual(await app2.exited, { code: 0, signal: null });
  assert.deepEqual(await hostExited, { code: 0, signal: null });
  const ls = await leaseList(container, processor);
  assert.ok(ls.every((l) => !l.owner), `leases still owned after the stops: ${JSON.stringify(ls.map((l) => l.owner))}`);
  assert.ok(app2.lines.some((l) => l.event === 'stopped'), 'node-2 stopped gracefully');
  assert.ok(!app2.lines.some((l) => l.event === 'error'), `node-2 reported errors: ${JSON.stringify(app2.lines.filter((l) => l.event === 'error'))}`);

  const all = handled();
  const c = counts(idsOf(all));
  for (let i = 0; i < 600; i++) assert.ok(c.has(`o${i}`), `order o${i} never handled`);
  const byHost = {};
  for (const r of all) byHost[r.host] = (byHost[r.host] || 0) + 1;
  const duplicates = all.length - c.size;
  assert.ok(byHost['node-1'] > 0 && byHost['node-2'] > 0 && byHost['cfp-1'] > 0, `every host handled changes: ${JSON.stringify(byHost)}`);
  assert.equal(c.size, 600);
  t.diagnostic(`changes 600, deliveries ${all.length}, duplicates ${duplicates}, by host ${JSON.stringify(byHost)}, leases ${ls.length} after the split, all taken over ${takeover} ms after the kill -9`);
});

test('manual checkpoints: only what ctx.checkpoint() covered is not delivered again', async (t) => {
  const container = 'manual';
  await writeOrders(emu, DB, container, 0, 60);
  const opts = base(container, 'manual', { manualCheckpoint: true, batchSize: 10 });

  // Run 1: handle everything, checkpoint nothing.
  let seen = [];
  let p = new Tracked({ ...opts, instance: 'm1' });
  p.onChanges(async (changes) => { seen.push(...changes.map((c) => c.id)); });
  await p.start();
  await until('60 changes', () => new Set(seen).size === 60);
  await p.stop();
  const firstRun = seen.length;
  for (const l of await leaseList(container, 'manual')) {
    assert.equal(l.checkpoint_lsn ?? null, null, `lease ${l.lease} was checkpointed without ctx.checkpoint()`);
  }

  // Run 2: everything comes again; checkpoint each batch whose last order is even-numbered.
  seen = [];
  const checkpointedThrough = new Map(); // lease -> ids up to its last checkpoint
  const sinceCheckpoint = new Map();
  p = new Tracked({ ...opts, instance: 'm2' });
  p.onChanges(async (changes, ctx) => {
    seen.push(...changes.map((c) => c.id));
    const pending = [...(sinceCheckpoint.get(ctx.lease) || []), ...changes.map((c) => c.id)];
    if (Number(changes[changes.length - 1].id.slice(1)) % 2 === 0) {
      await ctx.checkpoint();
      checkpointedThrough.set(ctx.lease, [...(checkpointedThrough.get(ctx.lease) || []), ...pending]);
      sinceCheckpoint.set(ctx.lease, []);
    } else {
      sinceCheckpoint.set(ctx.lease, pending);
    }
  });
  await p.start();
  await until('60 changes again', () => new Set(seen).size === 60);
  await p.stop();
  const covered = new Set([...checkpointedThrough.values()].flat());
  const uncovered = new Set([...sinceCheckpoint.values()].flat());

  // Run 3: exactly the changes not covered by a checkpoint come again.
  seen = [];
  p = new Tracked({ ...opts, instance: 'm3' });
  p.onChanges(async (changes, ctx) => {
    seen.push(...changes.map((c) => c.id));
    await ctx.checkpoint();
  });
  await p.start();
  if (uncovered.size > 0) await until('the uncovered changes', () => new Set(seen).size >= uncovered.size);
  // One more acquire cycle and poll so that anything else would have come too.
  await new Promise((r) => setTimeout(r, 1500));
  await p.stop();
  assert.deepEqual(new Set(seen), uncovered, 'run 3 delivers the changes after each lease\'s last checkpoint, no others');
  for (const id of covered) assert.ok(!seen.includes(id), `${id} was checkpointed and came again`);
  t.diagnostic(`run 1 handled ${firstRun}, run 2 checkpointed ${covered.size} and left ${uncovered.size}, run 3 got ${seen.length}`);
});

test('a slow handler applies backpressure: cfp reads no more pages while batches wait', async (t) => {
  const container = 'slow';
  await writeOrders(emu, DB, container, 0, 2000);
  const port = await freePort();
  const addr = `127.0.0.1:${port}`;
  const p = new Tracked(base(container, 'slow', { batchSize: 10, metricsAddr: addr, instance: 'slow-1' }));
  let release;
  const gate = new Promise((r) => { release = r; });
  const waiting = new Set();
  let handled = 0;
  p.onChanges(async (changes, ctx) => {
    waiting.add(ctx.lease);
    await gate;
    handled += changes.length;
  });
  await p.start();
  await until('a batch of every lease waiting', async () => waiting.size === 4 && (await metric(addr, 'cfp_process_owned_leases')) === 4);
  // The read-ahead of each lease may still be under way: give it time to finish, then watch.
  await new Promise((r) => setTimeout(r, 1000));
  const ru1 = await metric(addr, 'cfp_process_request_units_total', 'kind="change_feed"');
  const rss1 = rssKiB(p.pid);
  await new Promise((r) => setTimeout(r, 3000)); // 30 poll intervals
  const ru2 = await metric(addr, 'cfp_process_request_units_total', 'kind="change_feed"');
  const rss2 = rssKiB(p.pid);
  assert.equal(handled, 0);
  assert.equal(ru2, ru1, 'cfp read change-feed pages while every lease waited for its handler');
  release();
  await until('2000 changes', () => handled >= 2000);
  const ru3 = await metric(addr, 'cfp_process_request_units_total', 'kind="change_feed"');
  assert.ok(ru3 > ru2, 'reads resumed once the handler answered');
  await p.stop();
  t.diagnostic(`change-feed RU while blocked: ${ru1} then ${ru2} 3 s later (${ru3} after all 2000); cfp RSS ${rss1} KiB then ${rss2} KiB`);
});

function rssKiB(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

test('stop() releases the leases, and the other process takes them within one acquire cycle', async (t) => {
  const container = 'takeover';
  await writeOrders(emu, DB, container, 0, 40);
  // A long expiration: a takeover faster than it proves the leases were released, not expired.
  const opts = base(container, 'takeover', { leaseExpiration: '60s', leaseAcquireInterval: '1s' });
  const owned = (ls, who) => ls.filter((l) => l.owner === who).length;
  const a = new Tracked({ ...opts, instance: 'a' });
  a.onChanges(async () => {});
  const released = [];
  a.onLeaseReleased((l, reason) => { released.push(reason); });
  await a.start();
  await until('a holds every lease', async () => owned(await leaseList(container, 'takeover'), 'a') === 4);
  const b = new Tracked({ ...opts, instance: 'b' });
  b.onChanges(async () => {});
  const bAcquired = [];
  b.onLeaseAcquired((l) => { bAcquired.push({ token: l.token, at: Date.now() }); });
  await b.start();
  await until('the leases balanced', async () => {
    const ls = await leaseList(container, 'takeover');
    return owned(ls, 'a') === 2 && owned(ls, 'b') === 2;
  });
  const before = bAcquired.length;
  const summary = await a.stop();
  const stoppedAt = Date.now();
  assert.equal(summary.reason, 'shutdown');
  assert.ok(released.filter((r) => r === 'shutdown').length >= 2, `a released its leases: ${released}`);
  assert.equal(a.leases.length, 0);
  await until('b holds every lease', async () => owned(await leaseList(container, 'takeover'), 'b') === 4, 30000);
  const took = Math.max(...bAcquired.slice(before).map((x) => x.at)) - stoppedAt;
  // An acquire cycle is 1s; without the release b would wait for the 60s expiration.
  assert.ok(took < 60000, `b took the released leases after ${took} ms`);
  await b.stop();
  t.diagnostic(`b took over 2 released leases ${took} ms after a's stop() resolved (acquire interval 1000 ms, expiration 60000 ms)`);
});

test('a cfp child that dies is an error, never hidden', async () => {
  const container = 'dies';
  await writeOrders(emu, DB, container, 0, 4);
  const p = new Tracked(base(container, 'dies', { instance: 'dies' }));
  p.onChanges(async () => {});
  const errors = [];
  p.onError((err) => errors.push(err));
  await p.start();
  process.kill(p.pid, 'SIGKILL');
  await assert.rejects(p.closed, (err) => err instanceof ProcessExitedError && err.signal === 'SIGKILL');
  assert.equal(errors.length, 1);
  assert.ok(errors[0] instanceof ProcessExitedError);
  assert.match(errors[0].message, /killed by SIGKILL unexpectedly/);
});

test('a handler that throws: the batch comes again, the engine reports it as an EngineError', async () => {
  const container = 'throws';
  await writeOrders(emu, DB, container, 0, 1);
  const p = new Tracked(base(container, 'throws', { instance: 'throws', retries: 5 }));
  let calls = 0;
  const attempts = [];
  p.onChanges(async (changes, ctx) => {
    attempts.push(ctx.attempt);
    if (++calls === 1) throw new Error('not yet');
  });
  const errors = [];
  p.onError((err) => errors.push(err));
  await p.start();
  await until('the second delivery', () => calls >= 2);
  await p.stop();
  assert.deepEqual(attempts.slice(0, 2), [1, 2]);
  const e = errors.find((x) => x instanceof EngineError);
  assert.ok(e, `no EngineError among ${errors.map((x) => x.message)}`);
  assert.equal(e.errorCause, 'user');
  assert.match(e.message, /not yet/);
});

test('start() fails with the reason when cfp cannot start, and with BinaryNotFoundError without a binary', async () => {
  const p = new Tracked({ ...base('nope', 'nope'), mode: 'all-versions', startFrom: 'beginning' });
  p.onChanges(async () => {});
  await assert.rejects(p.start(), (err) => err instanceof ProcessExitedError && err.exitCode === 2 && /all-versions/.test(err.message));
  const q = new Tracked({ ...base('nope', 'nope'), cfpPath: path.join(work, 'no-such-cfp') });
  q.onChanges(async () => {});
  await assert.rejects(q.start(), BinaryNotFoundError);
});

test('estimate() gives the lag per lease', async () => {
  const container = 'lag';
  await writeOrders(emu, DB, container, 0, 20);
  const p = new Tracked(base(container, 'lag', { instance: 'lag' }));
  let n = 0;
  p.onChanges(async (changes) => { n += changes.length; });
  await p.start();
  await until('20 changes', () => n === 20);
  await p.stop();
  await writeOrders(emu, DB, container, 20, 10);
  const est = await estimate({ endpoint: emu.endpoint, key: emu.key, database: DB, container, processor: 'lag', cfpPath });
  assert.equal(est.leases.length, 4);
  assert.ok(est.leases.every((l) => typeof l.lag === 'number' && 'verdict' in l));
  assert.ok(est.summary.total_lag >= 10, `total lag ${est.summary.total_lag} after 10 new changes`);
});

test('without onError: a failing handler is a process warning, a dead child is thrown', async () => {
  const container = 'noerror';
  await writeOrders(emu, DB, container, 0, 1);
  const opts = base(container, 'noerror', { instance: 'noerror', retries: 5 });
  const child = spawn(process.execPath, [path.join(here, 'fixtures', 'no-onerror.mjs')], {
    env: { ...process.env, CFP_TEST_OPTS: JSON.stringify(opts) }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 1, stderr);
  assert.match(stderr, /EngineError: lease \S+: batch failed in the application: once/);
  assert.match(stderr, /ProcessExitedError: cfp was killed by SIGKILL unexpectedly/);
});
