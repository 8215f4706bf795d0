// What the job queue's users see: a job, its handler and context, the queue's options and lanes.
import type { DatabaseOutages, Db } from '../db/index.js';

export interface Job {
  id: string;
  kind: string;
  tenantId: string;
  payload: Record<string, unknown>;
  /** 1 on the first run. */
  attempts: number;
  maxAttempts: number;
}

export interface JobContext {
  /** Renews the lease now (it is also renewed on a timer while the handler runs). */
  heartbeat(): Promise<void>;
  /** Aborted when the lease was lost to another worker or the queue is stopping for good. */
  signal: AbortSignal;
}

export type JobHandler = (job: Job, ctx: JobContext) => Promise<void>;

export interface JobKindOptions {
  /**
   * Called once when a job of this kind ends `failed` for good — its last attempt threw, or its
   * worker died on every attempt (then the handler never saw the end) — to record the outcome
   * where users read it (a source's `sync_status`, a run's `status`).
   */
  onFailed?: (job: Job, error: string) => Promise<void>;
}

export interface EnqueueInput {
  kind: string;
  tenantId: string;
  payload?: Record<string, unknown>;
  /** At most one queued-or-running job per tenant carries this key; a second enqueue joins it. */
  dedupeKey?: string;
  /**
   * When the key's job is running, have it run once more after this run succeeds (one follow-up
   * at most, never alongside it) rather than join it. A queued job is joined either way.
   */
  followUp?: boolean;
  runAt?: Date;
  maxAttempts?: number;
}

export interface JobLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface JobQueueOptions {
  db: Db;
  log: JobLog;
  /** How often an idle worker looks for due jobs. */
  pollMs?: number;
  /** Handlers of the default lane (every kind no other lane names) run at once by this process. */
  concurrency?: number;
  /** The default lane's `tenantShare` (see JobLane); half its concurrency, rounded up, if unset. */
  tenantShare?: number;
  /** Lanes besides the default one, each with workers of its own for its kinds. */
  lanes?: JobLane[];
  /** A claimed job belongs to its worker this long without a heartbeat. */
  leaseMs?: number;
  /** First retry delay; doubles with each attempt, capped at `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long `stop()` waits for running handlers before aborting them. */
  stopGraceMs?: number;
  /**
   * Told of the queue's own statements (polls, heartbeats, schedules) that failed for want of the
   * database, which it logs once per outage; without it they are logged each time.
   */
  outages?: Pick<DatabaseOutages, 'failed'>;
}

/** A pool of workers for some job kinds: only it claims them, and it claims nothing else. */
export interface JobLane {
  /** For the log. */
  name: string;
  kinds: string[];
  /** Handlers of this lane run at once by this process. */
  concurrency: number;
  /** Handlers of one tenant this lane runs at once in this process; unset: no cap. */
  tenantConcurrency?: number;
  /**
   * Handlers of one tenant this lane runs at once in this process while other tenants' jobs are
   * due; beyond it, only when none is. Unset: no share.
   */
  tenantShare?: number;
}

/** A claimed job and the token that proves this worker still owns it. */
export interface Claim {
  job: Job;
  token: string;
}
