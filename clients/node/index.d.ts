// Types of @cfp-dev/changefeed (checked by `npm run typecheck` and test/types-check.ts).

/** An EPK range, hex strings; "" is the minimum, "FF" the maximum. */
export interface Range {
  min: string;
  max: string;
}

/** A lease this process holds. */
export interface Lease {
  /** The lease token: a partition id ("0") or "min-max". */
  token: string;
  range: Range | null;
  /** The lease's checkpoint when it was acquired (then the last one this process wrote); "" when none. */
  continuation: string;
}

/** Why a lease ended on this host. */
export type ReleaseReason = 'shutdown' | 'rebalance' | 'split' | (string & {});

/** The context of one batch. */
export interface BatchContext {
  /** The lease token. */
  lease: string;
  range: Range | null;
  /** The position after this batch: what a checkpoint writes. */
  continuation: string;
  /** 1 the first time a batch is delivered, 2 after one failure, ... */
  attempt: number;
  /**
   * Checkpoints this batch (and the batches before it of this lease) as soon as the handler
   * returns. Only needed with `manualCheckpoint: true`: otherwise every batch is checkpointed.
   */
  checkpoint(): Promise<void>;
}

/** A changed document as the change feed returned it (all-versions mode: {current, previous, metadata}). */
export type Change = Record<string, any>;

export type ChangesHandler<T = Change> = (changes: T[], ctx: BatchContext) => void | Promise<void>;

/** An engine event, as `cfp process --events jsonl` writes it (docs/scripting.md). */
export interface EngineEvent {
  type: string;
  time: string;
  owner?: string;
  lease?: string;
  range?: Range;
  items?: number;
  continuation?: string;
  cause?: 'user' | 'infra' | (string & {});
  error?: string;
  permanent?: boolean;
  attempt?: number;
  children?: string[];
  [field: string]: unknown;
}

/** The summary cfp reports when it stops (the `summary` event). */
export interface Summary extends EngineEvent {
  batches?: number;
  processed?: number;
  errors?: number;
  seconds?: number;
  reason?: 'shutdown' | 'stopped' | (string & {});
  request_charge?: number;
  request_units?: Record<string, number>;
}

/** What cfp says once started. */
export interface Hello {
  protocol: number;
  version: string;
  owner: string;
  processor: string;
  prefix: string;
}

/** A duration: milliseconds, or a Go duration string ("500ms", "13s", "1m"). */
export type Duration = number | string;

/** How to reach the account; secrets go to cfp through its environment, never its arguments. */
export interface ConnectionOptions {
  /** The account endpoint, https://... (a served `cfp emulator` on loopback needs no key). */
  endpoint?: string;
  /** The account key (COSMOS_KEY). */
  key?: string;
  /** A connection string (COSMOS_CONNECTION_STRING). */
  connectionString?: string;
  /** cfp's embedded emulator in the cfp process: true, or a data directory. */
  local?: boolean | string;
  database: string;
  container: string;
  /** The processor name (the lease prefix, as .NET's processor name). */
  processor: string;
  /** The lease container (default: leases). */
  leaseContainer?: string;
  leaseDatabase?: string;
  /** The cfp binary (else CFP_PATH, the platform package @cfp-dev/cli-<platform>-<arch>, PATH). */
  cfpPath?: string;
  /** Environment added to cfp's (this process's environment otherwise). */
  env?: Record<string, string>;
  /** cfp's --log-level: debug, info, warn, error. */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** More cfp arguments, appended as given. */
  args?: string[];
}

export interface ProcessorOptions extends ConnectionOptions {
  /** This host's name, written as the owner of its leases (default <hostname>-<pid>-<random>). */
  instance?: string;
  /** Where leases without a checkpoint start: "now" (default), "beginning", a Date, an RFC 3339 time or "-<duration>". */
  startFrom?: 'now' | 'beginning' | Date | string;
  mode?: 'latest' | 'all-versions';
  createLeaseContainer?: boolean;
  /** Answer "done" unless the handler calls ctx.checkpoint(), as .NET's WithManualCheckpoint. */
  manualCheckpoint?: boolean;
  batchSize?: number;
  pollInterval?: Duration;
  leaseAcquireInterval?: Duration;
  leaseRenewInterval?: Duration;
  leaseExpiration?: Duration;
  checkpointInterval?: Duration;
  shutdownTimeout?: Duration;
  /** How long cfp waits for a batch's handler before the batch fails (cfp's default 10m). */
  answerTimeout?: Duration;
  /** Retries of a failed batch before onError applies (cfp's default 3). */
  retries?: number;
  /** What cfp does with a batch that still fails: stop (default), skip, dead-letter. */
  onError?: 'stop' | 'skip' | 'dead-letter';
  deadLetter?: string;
  metricsAddr?: string;
  /** cfp's stderr (its logs): copied to process.stderr (default), 'ignore', or a function. */
  stderr?: 'inherit' | 'ignore' | ((text: string) => void);
}

export declare class ChangeFeedProcessor<T = Change> {
  constructor(options: ProcessorOptions);
  onChanges(handler: ChangesHandler<T>): this;
  onLeaseAcquired(handler: (lease: Lease) => void | Promise<void>): this;
  onLeaseReleased(handler: (lease: Lease, reason: ReleaseReason) => void | Promise<void>): this;
  onLeaseLost(handler: (lease: Lease) => void | Promise<void>): this;
  /**
   * Every ChangeFeedError. Without a handler, a ProcessExitedError or ProtocolError is thrown
   * (uncaught) and the others are process warnings: never hidden.
   */
  onError(handler: (err: ChangeFeedError) => void): this;
  onEvent(handler: (event: EngineEvent) => void): this;
  /** Starts cfp; resolves once the lease store is initialised. */
  start(): Promise<Hello>;
  /**
   * Stops gracefully: leases checkpointed (with manualCheckpoint, only what the handlers
   * checkpointed) and released; resolves with cfp's summary.
   */
  stop(): Promise<Summary | null>;
  readonly info: Hello | null;
  readonly leases: Lease[];
  readonly pid: number | undefined;
  /** Settles when cfp is gone: the summary after stop(), a ProcessExitedError otherwise. */
  readonly closed: Promise<Summary | null>;
}

export interface EstimateOptions extends ConnectionOptions {
  /** An empty lease set is an estimate of no leases, not an error. */
  allowEmpty?: boolean;
}

/** One lease of an estimate (docs/scripting.md, "cfp estimate -o json"). */
export interface LeaseEstimate {
  lease: string;
  range: Range | null;
  owner: string | null;
  state: 'owned' | 'expired' | 'unowned' | (string & {});
  checkpoint_lsn: number | null;
  latest_lsn: number | null;
  lag: number;
  sentinel: string | null;
  time_lag_seconds: number | null;
  age_seconds: number | null;
  progress: string;
  verdict: 'idle' | 'ok' | 'lagging' | 'stuck' | 'stalled' | 'rewound' | 'failing' | (string & {});
  [field: string]: unknown;
}

export interface Estimate {
  time: string;
  prefix: string;
  leases: LeaseEstimate[];
  summary: {
    total_lag: number;
    leases: number;
    owned: number;
    live_owners: number;
    max_time_lag_seconds: number | null;
    [field: string]: unknown;
  };
}

/** The lag per lease: runs `cfp estimate -o json`. */
export declare function estimate(options: EstimateOptions): Promise<Estimate>;

/** The cfp binary this library would run. */
export declare function findCfp(cfpPath?: string, env?: Record<string, string | undefined>): string;

/** The name of the platform package: @cfp-dev/cli-<platform>-<arch>. */
export declare function platformPackage(platform?: string, arch?: string): string;

export declare const PROTOCOL: 1;

export declare class ChangeFeedError extends Error {}
/** A missing or wrong option, thrown by the constructor and estimate() before cfp runs. */
export declare class OptionsError extends ChangeFeedError {}
export declare class BinaryNotFoundError extends ChangeFeedError {}
export declare class ProcessExitedError extends ChangeFeedError {
  exitCode: number | null;
  signal: string | null;
  /** The end of cfp's stderr. */
  stderr: string;
}
export declare class ProtocolError extends ChangeFeedError {}
export declare class EngineError extends ChangeFeedError {
  event: EngineEvent;
  /** "user" (a handler failed) or "infra". */
  errorCause: string | undefined;
  lease: string | undefined;
  attempt: number | undefined;
  permanent: boolean;
}
export declare class EstimateError extends ChangeFeedError {
  exitCode: number | null;
  stderr: string;
}

declare const _default: {
  ChangeFeedProcessor: typeof ChangeFeedProcessor;
  estimate: typeof estimate;
  findCfp: typeof findCfp;
  platformPackage: typeof platformPackage;
  ChangeFeedError: typeof ChangeFeedError;
  OptionsError: typeof OptionsError;
  BinaryNotFoundError: typeof BinaryNotFoundError;
  ProcessExitedError: typeof ProcessExitedError;
  ProtocolError: typeof ProtocolError;
  EngineError: typeof EngineError;
  EstimateError: typeof EstimateError;
  PROTOCOL: 1;
};
export default _default;
