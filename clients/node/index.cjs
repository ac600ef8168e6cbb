'use strict';
// @cfp-dev/changefeed: an Azure Cosmos DB change feed processor for Node.js on cfp's engine.
//
// The library runs `cfp process --app-protocol 1` as a child process and speaks the
// application protocol, version 1, with it (cfp's docs/scripting.md, "Application protocol,
// version 1"): JSON lines, cfp's stdout to us and our answers to its stdin, one channel for
// every lease the host holds. The engine (leases shared with .NET and Java hosts, balancing,
// splits, merges, checkpoints) is cfp's; this file only routes messages to the handlers.
// It has no runtime dependency and installs no signal handler.

const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const PROTOCOL = 1;
// The last bytes of cfp's stderr kept for the error of a child that died.
const STDERR_TAIL = 8192;

/** The base class of every error this library reports. */
class ChangeFeedError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = this.constructor.name;
  }
}

/**
 * An option is missing or wrong (no account, no database, a negative duration): thrown by the
 * constructor and estimate() before cfp runs. What only cfp can check (a wrong key, a missing
 * container) rejects start() with a ProcessExitedError carrying cfp's one-line reason.
 */
class OptionsError extends ChangeFeedError {}

/** The cfp binary was not found (option cfpPath, the platform package, PATH). */
class BinaryNotFoundError extends ChangeFeedError {}

/**
 * The cfp child exited when it was not asked to (or failed on its way out): `exitCode`,
 * `signal`, and `stderr`, the end of its stderr (its last line says why: "cfp: ...").
 */
class ProcessExitedError extends ChangeFeedError {
  constructor(message, { exitCode = null, signal = null, stderr = '', cause } = {}) {
    super(message, cause ? { cause } : undefined);
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderr = stderr;
  }
}

/** cfp wrote something the protocol does not allow (a library or version mismatch). */
class ProtocolError extends ChangeFeedError {}

/**
 * An error the engine reported (an `error` event): `cause` is "user" (a handler failed: the
 * batch is retried, then cfp's --on-error applies) or "infra" (the service or the lease store
 * failed); `lease`, `attempt`, `permanent` and the whole `event` as cfp sent it.
 */
class EngineError extends ChangeFeedError {
  constructor(event) {
    super(event.error || 'error reported by cfp');
    this.event = event;
    this.errorCause = event.cause;
    this.lease = event.lease;
    this.attempt = event.attempt;
    this.permanent = Boolean(event.permanent);
  }
}

/** `estimate()` failed: `exitCode` and `stderr` of `cfp estimate`. */
class EstimateError extends ChangeFeedError {
  constructor(message, { exitCode = null, stderr = '' } = {}) {
    super(message);
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

function platformPackage(platform = process.platform, arch = process.arch) {
  return `@cfp-dev/cli-${platform}-${arch}`;
}

function exeName(platform = process.platform) {
  return platform === 'win32' ? 'cfp.exe' : 'cfp';
}

/**
 * Finds the cfp binary: the option, else CFP_PATH, else the platform package installed beside
 * this one (@cfp-dev/cli-<platform>-<arch>, an optional dependency of the released package),
 * else `cfp` on PATH. Throws BinaryNotFoundError naming every place it looked.
 */
function findCfp(cfpPath, env = process.env) {
  const looked = [];
  const given = cfpPath || env.CFP_PATH;
  if (given) {
    if (isExecutable(given)) return given;
    throw new BinaryNotFoundError(`cfp binary ${JSON.stringify(given)} (${cfpPath ? 'option cfpPath' : 'CFP_PATH'}) does not exist or is not executable`);
  }
  const pkg = platformPackage();
  try {
    const p = require.resolve(`${pkg}/bin/${exeName()}`);
    if (isExecutable(p)) return p;
    looked.push(`${p} (not executable)`);
  } catch {
    looked.push(`package ${pkg} (not installed)`);
  }
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, exeName());
    if (isExecutable(p)) return p;
  }
  looked.push('PATH');
  throw new BinaryNotFoundError(`cfp binary not found: looked in ${looked.join(', ')}; install cfp, or pass cfpPath`);
}

function isExecutable(p) {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function duration(v, name) {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number') {
    if (!Number.isFinite(v) || v < 0) throw new OptionsError(`${name}: want milliseconds >= 0, got ${v}`);
    return `${Math.round(v)}ms`;
  }
  if (typeof v === 'string') return v;
  throw new OptionsError(`${name}: want milliseconds or a duration string like "5s"`);
}

/**
 * The connection part of cfp's command line and environment, shared by the processor and
 * estimate(): secrets go through the environment, never argv.
 */
function connection(opts) {
  const args = [];
  const env = { ...process.env, ...(opts.env || {}) };
  if (opts.local) {
    args.push(opts.local === true ? '--local' : `--local=${opts.local}`);
  }
  if (opts.endpoint) args.push('--endpoint', opts.endpoint);
  if (opts.key) env.COSMOS_KEY = opts.key;
  if (opts.connectionString) env.COSMOS_CONNECTION_STRING = opts.connectionString;
  if (!opts.local && !opts.endpoint && !opts.connectionString && !env.COSMOS_ENDPOINT && !env.COSMOS_CONNECTION_STRING && !env.CFP_LOCAL && !env.CFP_CONTEXT) {
    throw new OptionsError('no account: give endpoint (and key), connectionString, or local');
  }
  for (const [name, flag] of [['database', '-d'], ['container', '-c'], ['processor', '-p'],
    ['leaseContainer', '--lease-container'], ['leaseDatabase', '--lease-database']]) {
    if (opts[name] !== undefined && opts[name] !== null) args.push(flag, String(opts[name]));
  }
  if (opts.logLevel) args.push('--log-level', opts.logLevel);
  return { args, env };
}

function required(opts, names) {
  for (const n of names) {
    if (!opts[n] && !(opts.env && opts.env[`COSMOS_${n.toUpperCase()}`])) {
      throw new OptionsError(`option ${n} is required`);
    }
  }
}

function startFromArg(v) {
  if (v === undefined || v === null) return undefined;
  if (v instanceof Date) return v.toISOString();
  return String(v);
}

/**
 * LineBuffer holds the start of a line that spans chunks of cfp's stdout, in one buffer that
 * grows to the longest line seen and is reused (at most 4 MiB are kept between lines).
 */
class LineBuffer {
  constructor() {
    this.buf = null;
    this.len = 0;
  }

  /** keep appends chunk[start:] to the line begun. */
  keep(chunk, start) {
    const n = chunk.length - start;
    const need = this.len + n;
    if (!this.buf || this.buf.length < need) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.buf ? this.buf.length * 2 : 256 * 1024));
      if (this.len) this.buf.copy(grown, 0, 0, this.len);
      this.buf = grown;
    }
    chunk.copy(this.buf, this.len, start);
    this.len = need;
  }

  /** take returns the line that ends at chunk[end] (the line begun, then chunk[start:end]). */
  take(chunk, start, end) {
    if (this.len === 0) return chunk.toString('utf8', start, end);
    this.keep(chunk.subarray(0, end), start);
    const line = this.buf.toString('utf8', 0, this.len);
    this.len = 0;
    if (this.buf.length > 4 * 1024 * 1024) this.buf = null;
    return line;
  }
}

/**
 * A change feed processor host in this process: `new ChangeFeedProcessor(options)`, then
 * `onChanges(handler)`, `await start()`, ..., `await stop()`.
 */
class ChangeFeedProcessor {
  constructor(options = {}) {
    required(options, ['database', 'container', 'processor']);
    this._opts = { ...options };
    const { args, env } = connection(options);
    args.unshift('process');
    args.push('--app-protocol', String(PROTOCOL));
    const o = options;
    if (o.instance) args.push('--instance', o.instance);
    const from = startFromArg(o.startFrom);
    if (from) args.push('--from', from);
    if (o.mode) args.push('--mode', o.mode);
    if (o.createLeaseContainer) args.push('--create-lease-container');
    if (o.batchSize) args.push('--batch-size', String(o.batchSize));
    for (const [name, flag] of [['pollInterval', '--poll-interval'], ['leaseAcquireInterval', '--lease-acquire-interval'],
      ['leaseRenewInterval', '--lease-renew-interval'], ['leaseExpiration', '--lease-expiration'],
      ['checkpointInterval', '--checkpoint-interval'], ['shutdownTimeout', '--shutdown-timeout'],
      ['answerTimeout', '--exec-timeout']]) {
      const d = duration(o[name], name);
      if (d !== undefined) args.push(flag, d);
    }
    if (o.retries !== undefined) args.push('--delegate-retries', String(o.retries));
    if (o.onError) args.push('--on-error', o.onError);
    if (o.deadLetter) args.push('--dead-letter', o.deadLetter);
    if (o.metricsAddr) args.push('--metrics-addr', o.metricsAddr);
    args.push('--events', 'none'); // events come over the channel
    if (o.args) args.push(...o.args);
    this._args = args;
    this._env = env;
    this._manual = Boolean(o.manualCheckpoint);
    this._handlers = { changes: null, acquired: [], released: [], lost: [], error: [], event: [] };
    this._leases = new Map(); // token -> {token, range, continuation}
    this._running = new Map(); // token -> the batch call of that lease still running
    this._child = null;
    this._state = 'new';
    this._hello = null;
    this._summary = null;
    this._stderrTail = '';
    this._stopping = false;
    this._closed = null;
  }

  /** The handler of each batch: `async (changes, ctx) => ...`. One batch per lease at a time. */
  onChanges(fn) { this._handlers.changes = fn; return this; }
  /** `async (lease) => ...` before the first batch of a lease. */
  onLeaseAcquired(fn) { this._handlers.acquired.push(fn); return this; }
  /** `async (lease, reason) => ...` after the last batch: reason shutdown, rebalance or split. */
  onLeaseReleased(fn) { this._handlers.released.push(fn); return this; }
  /** `async (lease) => ...`: another host owns the lease now; nothing more is checkpointed. */
  onLeaseLost(fn) { this._handlers.lost.push(fn); return this; }
  /** `(err) => ...`: every ChangeFeedError (a dead child, an engine error event). */
  onError(fn) { this._handlers.error.push(fn); return this; }
  /** `(event) => ...`: every engine event as cfp reports it (acquired, split, merge, ...). */
  onEvent(fn) { this._handlers.event.push(fn); return this; }

  /** The hello line: `{protocol, version, owner, processor, prefix}` once started. */
  get info() { return this._hello; }
  /** The leases this process holds now. */
  get leases() { return [...this._leases.values()]; }
  /** The pid of the cfp child (undefined before start). */
  get pid() { return this._child ? this._child.pid : undefined; }
  /**
   * A promise settled when the cfp child is gone: the summary after stop(), a
   * ProcessExitedError when it died or failed.
   */
  get closed() { return this._closed ? this._closed.promise : Promise.resolve(null); }

  /** Starts cfp and resolves once it initialised the lease store (its hello). */
  start() {
    if (this._state !== 'new') return Promise.reject(new ChangeFeedError(`start: the processor is ${this._state}`));
    if (!this._handlers.changes) return Promise.reject(new TypeError('start: call onChanges(handler) first'));
    let bin;
    try {
      bin = findCfp(this._opts.cfpPath, this._env);
    } catch (err) {
      return Promise.reject(err);
    }
    this._state = 'starting';
    this._closed = deferred();
    this._closed.promise.catch(() => {}); // reported through onError or start()/stop()
    // Its own process group: a Ctrl-C in the terminal reaches this process only, and stopping
    // is the application's decision (stop()). If this process dies, cfp sees the end of its
    // stdin and stops gracefully on its own.
    const child = spawn(bin, this._args, {
      env: this._env, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true, detached: process.platform !== 'win32',
    });
    this._child = child;
    const started = deferred();
    this._started = started;
    child.stdin.on('error', () => {}); // a dead child: reported by its exit
    child.stderr.on('data', (chunk) => this._onStderr(chunk));
    // Lines are cut from the raw chunks and decoded once each: a batch line is one JSON.parse
    // of one string, without growing a string chunk by chunk. A line that spans chunks is
    // copied into one buffer kept for the next such line (a batch line spans several 64 KiB
    // reads), not gathered with Buffer.concat, which allocated a new one for every line.
    const lines = new LineBuffer();
    child.stdout.on('data', (chunk) => {
      let start = 0;
      let nl;
      while ((nl = chunk.indexOf(10, start)) >= 0) {
        const line = lines.take(chunk, start, nl);
        start = nl + 1;
        if (line) this._onLine(line);
      }
      if (start < chunk.length) lines.keep(chunk, start);
    });
    child.on('error', (err) => {
      const e = err.code === 'ENOENT'
        ? new BinaryNotFoundError(`cannot run ${bin}: ${err.message}`)
        : new ProcessExitedError(`cannot run ${bin}: ${err.message}`, { cause: err });
      this._finish(e);
    });
    child.on('close', (code, signal) => this._onExit(code, signal));
    return started.promise;
  }

  /**
   * Stops gracefully: no new batches; batches in flight finish; each lease is checkpointed
   * (what was acknowledged) and released, so other hosts take it at once. Resolves with cfp's
   * summary once the child exited.
   */
  async stop() {
    if (this._state === 'new') return null;
    if (this._state === 'starting') {
      try { await this._started.promise; } catch { /* reported by closed */ }
    }
    if (this._state !== 'closed' && !this._stopping) {
      this._stopping = true;
      this._write({ type: 'stop' });
    }
    return this._closed.promise;
  }

  _onStderr(chunk) {
    const text = chunk.toString('utf8');
    this._stderrTail = (this._stderrTail + text).slice(-STDERR_TAIL);
    const sink = this._opts.stderr;
    if (typeof sink === 'function') sink(text);
    else if (sink !== 'ignore') process.stderr.write(text);
  }

  _write(msg) {
    const child = this._child;
    if (!child || !child.stdin.writable) return;
    child.stdin.write(JSON.stringify(msg) + '\n');
  }

  _answer(id, type, message) {
    this._write(message === undefined ? { id, type } : { id, type, message });
  }

  _onLine(line) {
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      this._protocolError(`not JSON: ${line.slice(0, 200)}`);
      return;
    }
    switch (m.type) {
      case 'batch': this._onBatch(m); return;
      case 'acquired': this._onAcquired(m); return;
      case 'released': this._onReleased(m); return;
      case 'lost': this._onLost(m); return;
      case 'event': this._onEvent(m.event || {}); return;
      case 'hello':
        if (m.protocol !== PROTOCOL) {
          this._protocolError(`cfp speaks protocol ${m.protocol}, this library ${PROTOCOL}`);
          return;
        }
        this._hello = { protocol: m.protocol, version: m.version, owner: m.owner, processor: m.processor, prefix: m.prefix };
        this._state = 'running';
        this._started.resolve(this._hello);
        return;
      case 'stopped':
        this._summary = m.summary || null;
        return;
      default:
        // Version 1 may add message types without an id: ignore them; answer the others.
        if (typeof m.id === 'number') this._answer(m.id, 'done');
    }
  }

  _protocolError(msg) {
    this._emitError(new ProtocolError(`cfp channel: ${msg}`));
  }

  _lease(m) {
    let l = this._leases.get(m.lease);
    if (!l) {
      l = { token: m.lease, range: m.range || null, continuation: m.continuation || '' };
      this._leases.set(m.lease, l);
    }
    return l;
  }

  async _onAcquired(m) {
    const lease = { token: m.lease, range: m.range || null, continuation: m.continuation || '' };
    this._leases.set(m.lease, lease);
    try {
      for (const fn of this._handlers.acquired) await fn(lease);
      this._answer(m.id, 'done');
    } catch (err) {
      this._answer(m.id, 'error', errorText(err));
    }
  }

  // cfp sends a lease's next batch only once the one before was answered, or once its answer
  // timed out (answerTimeout): then the retry comes while the first call may still run. It
  // waits for that call, so that a lease has one batch in the handler at a time.
  async _onBatch(m) {
    const prev = this._running.get(m.lease);
    const run = prev ? prev.then(() => this._runBatch(m)) : this._runBatch(m);
    this._running.set(m.lease, run);
    await run;
    if (this._running.get(m.lease) === run) this._running.delete(m.lease);
  }

  async _runBatch(m) {
    const lease = this._lease(m);
    if (m.range) lease.range = m.range;
    let checkpoint = !this._manual;
    const ctx = {
      lease: m.lease,
      range: m.range || null,
      continuation: m.continuation,
      attempt: m.attempt,
      /**
       * Checkpoints this batch (and those before it of this lease) as soon as the handler
       * returns. Without manualCheckpoint every batch is checkpointed anyway.
       */
      checkpoint: async () => { checkpoint = true; },
    };
    try {
      await this._handlers.changes(m.items || [], ctx);
      if (checkpoint) lease.continuation = m.continuation;
      this._answer(m.id, checkpoint ? 'checkpoint' : 'done');
    } catch (err) {
      this._answer(m.id, 'error', errorText(err));
    }
  }

  async _onReleased(m) {
    const lease = this._leases.get(m.lease) || { token: m.lease, range: null, continuation: '' };
    this._leases.delete(m.lease);
    try {
      for (const fn of this._handlers.released) await fn(lease, m.reason);
    } catch (err) {
      this._emitError(new ChangeFeedError(`onLeaseReleased for lease ${m.lease}: ${errorText(err)}`, { cause: err }));
    }
    this._answer(m.id, this._manual ? 'done' : 'checkpoint');
  }

  async _onLost(m) {
    const lease = this._leases.get(m.lease) || { token: m.lease, range: null, continuation: '' };
    this._leases.delete(m.lease);
    try {
      for (const fn of this._handlers.lost) await fn(lease);
    } catch (err) {
      this._emitError(new ChangeFeedError(`onLeaseLost for lease ${m.lease}: ${errorText(err)}`, { cause: err }));
    }
    this._answer(m.id, 'done');
  }

  _onEvent(e) {
    for (const fn of this._handlers.event) {
      try { fn(e); } catch (err) { this._emitError(new ChangeFeedError(`onEvent: ${errorText(err)}`, { cause: err })); }
    }
    if (e.type === 'error') this._emitError(new EngineError(e));
  }

  _emitError(err) {
    if (this._handlers.error.length === 0) {
      // Never hidden. With no onError handler, the end of the processor (cfp died, or spoke
      // nonsense) is thrown, as an 'error' event of an EventEmitter without a listener is;
      // errors it goes on after (a handler's failure, a throttled read) are process warnings.
      if (err instanceof ProcessExitedError || err instanceof ProtocolError) {
        queueMicrotask(() => { throw err; });
      } else {
        process.emitWarning(err);
      }
      return;
    }
    for (const fn of this._handlers.error) fn(err);
  }

  _onExit(code, signal) {
    if (this._state === 'closed') return;
    const tail = this._stderrTail;
    const last = lastLine(tail);
    if (this._stopping && code === 0) {
      this._finish(null);
      return;
    }
    const how = signal ? `was killed by ${signal}` : `exited with status ${code}`;
    const when = this._state === 'starting' ? 'before it started' : (this._stopping ? 'while stopping' : 'unexpectedly');
    this._finish(new ProcessExitedError(`cfp ${how} ${when}${last ? `: ${last}` : ''}`, { exitCode: code, signal, stderr: tail }));
  }

  _finish(err) {
    if (this._state === 'closed') return;
    const wasStarting = this._state === 'starting';
    this._state = 'closed';
    this._leases.clear();
    if (err) {
      if (wasStarting) {
        this._started.reject(err);
      } else if (!this._stopping) {
        this._emitError(err);
      }
      this._closed.reject(err);
    } else {
      this._closed.resolve(this._summary);
    }
  }
}

// lastLine is what a failed cfp said: its last "cfp: ..." error line (a usage error is
// followed by its usage and a pointer to --help, others by a "Try: ..." hint), "" when it wrote
// none (killed). Its "cfp: note:" and "cfp: warning:" lines say nothing about an exit.
function lastLine(text) {
  const lines = text.split('\n').map((l) => l.trim());
  for (let i = lines.length - 1; i >= 0; i--) {
    const l = lines[i];
    if (l.startsWith('cfp: ') && !l.startsWith('cfp: note:') && !l.startsWith('cfp: warning:')) return l;
  }
  return '';
}

function errorText(err) {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

/**
 * The lag of a processor, per lease: runs `cfp estimate -o json` and resolves with its
 * object ({time, prefix, leases: [{lease, owner, lag, verdict, ...}], summary: {total_lag, ...}}).
 * An exit 3 (a threshold given in args was crossed) still resolves with the estimate.
 */
function estimate(options = {}) {
  return new Promise((resolve, reject) => {
    let bin;
    let conn;
    try {
      required(options, ['database', 'container', 'processor']);
      conn = connection(options);
      bin = findCfp(options.cfpPath, conn.env);
    } catch (err) {
      reject(err);
      return;
    }
    const args = ['estimate', ...conn.args, '-o', 'json'];
    if (options.allowEmpty) args.push('--allow-empty');
    if (options.args) args.push(...options.args);
    execFile(bin, args, { env: conn.env, maxBuffer: 64 << 20, windowsHide: true }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      if (code === 0 || code === 3) {
        try {
          resolve(JSON.parse(stdout));
          return;
        } catch {
          // fall through
        }
      }
      const last = lastLine(stderr);
      reject(new EstimateError(`cfp estimate failed${code !== null ? ` (exit ${code})` : ''}${last ? `: ${last}` : ''}`, { exitCode: code, stderr }));
    });
  });
}

module.exports = {
  ChangeFeedProcessor,
  estimate,
  findCfp,
  platformPackage,
  ChangeFeedError,
  OptionsError,
  BinaryNotFoundError,
  ProcessExitedError,
  ProtocolError,
  EngineError,
  EstimateError,
  PROTOCOL,
};
