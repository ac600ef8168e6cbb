// The library's side of the application protocol against a stand-in cfp
// (test/fixtures/fake-cfp.mjs): what it promises the handlers whatever cfp sends.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { ChangeFeedProcessor } from '../index.mjs';
import { tempDir } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

function fakeCfp() {
  const exe = path.join(tempDir('cfp-fake-'), 'cfp');
  fs.writeFileSync(exe, `#!/bin/sh\nexec "${process.execPath}" "${path.join(here, 'fixtures', 'fake-cfp.mjs')}" "$@"\n`);
  fs.chmodSync(exe, 0o755);
  return exe;
}

test('one batch per lease at a time, even when cfp resends a batch whose answer timed out', async () => {
  // Found by hand: with answerTimeout 1s and a 3 s handler, two calls of the handler ran for
  // one lease at once (the retry came while the first call still ran), though the guide
  // promises one batch at a time per lease.
  let stderr = '';
  const p = new ChangeFeedProcessor({
    endpoint: 'http://127.0.0.1:1/', database: 'd', container: 'c', processor: 'p',
    cfpPath: fakeCfp(), env: { FAKE_CFP: 'timeout-resend' }, stderr: (t) => { stderr += t; },
  });
  let running = 0;
  const calls = [];
  let release;
  const gate = new Promise((r) => { release = r; });
  let done;
  const bothDone = new Promise((r) => { done = r; });
  p.onChanges(async (changes, ctx) => {
    running++;
    calls.push({ attempt: ctx.attempt, running });
    if (ctx.attempt === 1) await gate;
    running--;
    if (ctx.attempt === 2) done();
  });
  let marker;
  const markerSeen = new Promise((r) => { marker = r; });
  p.onEvent((e) => { if (e.type === 'marker') marker(); });
  await p.start();
  // The marker comes after both batches: the library has taken both in.
  await markerSeen;
  assert.deepEqual(calls, [{ attempt: 1, running: 1 }], 'the resent batch ran beside the first call');
  release();
  await bothDone;
  assert.deepEqual(calls, [{ attempt: 1, running: 1 }, { attempt: 2, running: 1 }]);
  await p.stop();
  // Both got their answer, in order (cfp drops the late one).
  const answers = stderr.split('\n').filter((l) => l.startsWith('answer {"id"')).map((l) => JSON.parse(l.slice(7)).id);
  assert.deepEqual(answers, [1, 2]);
});

test('batch lines cut anywhere by the pipe come whole, characters of several bytes too', async () => {
  const p = new ChangeFeedProcessor({
    endpoint: 'http://127.0.0.1:1/', database: 'd', container: 'c', processor: 'p',
    cfpPath: fakeCfp(), env: { FAKE_CFP: 'split-lines' }, stderr: 'ignore',
  });
  const got = [];
  let done;
  const all = new Promise((r) => { done = r; });
  p.onChanges(async (changes, ctx) => {
    got.push({ continuation: ctx.continuation, id: changes[0].id, ok: changes[0].text === 'é€😀'.repeat(Number(changes[0].id)) });
    if (got.length === 5) done();
  });
  await p.start();
  await all;
  await p.stop();
  assert.deepEqual(got, [
    { continuation: '"1"', id: '3', ok: true },
    { continuation: '"2"', id: '80000', ok: true },
    { continuation: '"3"', id: '1', ok: true },
    { continuation: '"4"', id: '2', ok: true },
    { continuation: '"5"', id: '40000', ok: true },
  ]);
});
