// Test helpers: the cfp binary, a served `cfp emulator` on a free port, and cfp commands
// against it.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..', '..');

/** A temporary directory removed at exit. */
export function tempDir(prefix = 'cfp-node-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

let built;
/** The cfp binary: CFP_PATH, else built from this repository once. */
export async function cfpBinary() {
  if (process.env.CFP_PATH) return process.env.CFP_PATH;
  if (!built) {
    built = (async () => {
      const out = path.join(tempDir('cfp-bin-'), 'cfp');
      await run('go', ['build', '-o', out, '.'], { cwd: repoRoot, env: { ...process.env, CGO_ENABLED: '0' } });
      return out;
    })();
  }
  return built;
}

/**
 * Starts `cfp emulator` on 127.0.0.1:0 with its own data directory and 4 physical partitions
 * per new container (the tests count on 4 leases); resolves with
 * {endpoint, key, dir, stop()} once it serves.
 */
export async function startEmulator() {
  const cfp = await cfpBinary();
  const dir = tempDir('cfp-emu-');
  const child = spawn(cfp, ['emulator', '--data', path.join(dir, 'data'), '--addr', '127.0.0.1:0', '--partitions', '4'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const serving = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(out.slice(0, nl)));
    });
    child.on('exit', (code) => reject(new Error(`cfp emulator exited ${code}: ${stderr}`)));
  });
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) { resolve(); return; }
    child.on('exit', () => resolve());
    child.kill('SIGTERM');
  });
  process.on('exit', () => child.kill('SIGKILL'));
  return { endpoint: serving.endpoint, key: serving.key, dir, stop, pid: child.pid };
}

/** Runs `cfp --endpoint E ARGS...` to its end; resolves with stdout. */
export async function cfp(emu, ...args) {
  const bin = await cfpBinary();
  const { stdout } = await run(bin, ['--endpoint', emu.endpoint, ...args], {
    env: { ...process.env, COSMOS_KEY: emu.key }, maxBuffer: 64 << 20,
  });
  return stdout;
}

/** Writes n orders o<from>..o<from+n-1> to database/container (created on first use). */
export async function writeOrders(emu, database, container, from, n) {
  const file = path.join(emu.dir, `orders-${from}-${n}.jsonl`);
  const lines = [];
  for (let i = from; i < from + n; i++) {
    lines.push(JSON.stringify({ id: `o${i}`, customerId: `c${i}`, total: i }));
  }
  fs.writeFileSync(file, lines.join('\n') + '\n');
  await cfp(emu, 'import', '-d', database, '-c', container, '--create', '--partition-key-path', '/customerId', file);
}

/** Waits until cond() is true (polling), failing after ms with what. */
export async function until(what, cond, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The ids in a JSON-lines file of handled changes (each line {id, lease, host}). */
export function readHandled(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** A metric's value from a Prometheus text page (sum over the matching series). */
export async function metric(addr, name, labelFilter = '') {
  const res = await fetch(`http://${addr}/metrics`);
  const text = await res.text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(name) && line.includes(labelFilter) && !line.startsWith('#')) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort() {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}
