// The library's errors without cfp emulator: options it refuses before running cfp, and what it
// says when cfp exits (a stand-in cfp, test/fixtures/fake-cfp.mjs).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  ChangeFeedError, ChangeFeedProcessor, EstimateError, OptionsError, ProcessExitedError, estimate,
} from '../index.mjs';
import { tempDir } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

function fakeCfp() {
  const exe = path.join(tempDir('cfp-fake-'), 'cfp');
  fs.writeFileSync(exe, `#!/bin/sh\nexec "${process.execPath}" "${path.join(here, 'fixtures', 'fake-cfp.mjs')}" "$@"\n`);
  fs.chmodSync(exe, 0o755);
  return exe;
}

const noAccountEnv = { COSMOS_ENDPOINT: '', COSMOS_CONNECTION_STRING: '', CFP_LOCAL: '', CFP_CONTEXT: '' };

test('a bad option is an OptionsError, a ChangeFeedError, thrown before cfp runs', async () => {
  const saved = {};
  for (const k of Object.keys(noAccountEnv)) { saved[k] = process.env[k]; delete process.env[k]; }
  try {
    assert.throws(() => new ChangeFeedProcessor({ database: 'd', container: 'c', processor: 'p' }),
      (err) => err instanceof OptionsError && err instanceof ChangeFeedError && /no account/.test(err.message));
    assert.throws(() => new ChangeFeedProcessor({ endpoint: 'http://127.0.0.1:1/', container: 'c', processor: 'p' }),
      (err) => err instanceof OptionsError && err.message === 'option database is required');
    assert.throws(() => new ChangeFeedProcessor({ endpoint: 'http://127.0.0.1:1/', database: 'd', container: 'c', processor: 'p', pollInterval: -1 }),
      (err) => err instanceof OptionsError && /pollInterval/.test(err.message));
    await assert.rejects(estimate({ database: 'd', container: 'c', processor: 'p' }), OptionsError);
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v !== undefined) process.env[k] = v;
  }
});

test('a killed cfp is not explained by a note it wrote before', async () => {
  // Found by hand: "cfp was killed by SIGKILL unexpectedly: cfp: note: 4 of 4 leases ...".
  const p = new ChangeFeedProcessor({
    endpoint: 'http://127.0.0.1:1/', database: 'd', container: 'c', processor: 'p',
    cfpPath: fakeCfp(), env: { FAKE_CFP: 'note-then-hello' }, stderr: 'ignore',
  });
  p.onChanges(async () => {});
  const errors = [];
  p.onError((err) => errors.push(err));
  await p.start();
  process.kill(p.pid, 'SIGKILL');
  await assert.rejects(p.closed, (err) => err instanceof ProcessExitedError);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].message, 'cfp was killed by SIGKILL unexpectedly');
  assert.match(errors[0].stderr, /cfp: note: 4 of 4 leases/);
});

test('estimate() fails with cfp\'s error line, not its hint', async () => {
  await assert.rejects(
    estimate({ endpoint: 'http://127.0.0.1:1/', database: 'shop', container: 'c', processor: 'never', cfpPath: fakeCfp(), env: { FAKE_CFP: 'no-leases' } }),
    (err) => err instanceof EstimateError && err.exitCode === 5
      && err.message === 'cfp estimate failed (exit 5): cfp: no leases for processor "never" in lease container shop/leases; found: a',
  );
});
