// The durable job queue (DESIGN.md §5): asynchronous work (source syncs, simulation runs,
// coverage evaluations, webhook deliveries) lives in the `jobs` table of the same database, so it
// survives restarts and every server process shares it.
//
// Written here rather than taken from pg-boss: pg-boss needs its own schema, LISTEN/NOTIFY and
// several sessions, and does not run on PGlite. The rules it rests on are few:
// - A job is claimed by one statement, `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED
//   LIMIT 1)`, which marks it `running` with a lease (`locked_until`) and a fresh `lock_token`.
//   Two processes can never claim the same job: the row lock decides, and the loser skips it.
// - While its handler runs, the worker renews the lease. A job whose lease expired (its process
//   died) is due again and is claimed by whoever polls next.
// - Finishing (success, retry, failure) is conditional on the lock token, so a worker that lost
//   its lease can never overwrite what the new owner did; its handler sees `signal` aborted.
// - A failed attempt is retried after an exponential backoff, up to `max_attempts`; then the job
//   is `failed` with `last_error`.
// - No transaction is ever held open around a handler (on PGlite a transaction holds the whole
//   database): claiming and finishing are single statements.
// - Workers are split in lanes, each claiming only its own kinds up to its own concurrency: a
//   kind that waits on the outside world (a webhook delivery on a slow receiver) takes the slots
//   of its lane, never those the other kinds need. Every kind no lane names is in the default one.
// - A lane may cap the jobs of one tenant it runs at once in this process (`tenantConcurrency`):
//   the claim then skips the tenants at their cap, so one tenant's slow jobs (deliveries to a
//   receiver that hangs until the timeout) leave the lane's other slots to the other tenants. The
//   cap counts this process's own handlers, which it knows exactly; with several processes a
//   tenant holds at most the cap in each, and every process keeps the rest of its lane for others.
//   The claim reads the lane's due jobs oldest first and passes over those of capped tenants, so a
//   capped tenant's backlog ahead of the others' is read through at each claim (an index scan of
//   its rows: milliseconds for tens of thousands).
// - A lane may also give each tenant a share (`tenantShare`, the default lane's is half its
//   workers): a tenant running its share gets another of the lane's slots only when no other
//   tenant's job is due. A tenant's long jobs (crawls, simulation runs) then use idle workers, yet
//   a job of another tenant takes the next slot that frees, instead of waiting behind them all.
// - A dedupe key admits one queued-or-running job. A request that finds the key's job running can
//   join it, or ask for a follow-up (`followUp`): the running job's row is marked, and finishing it
//   queues it again instead. Being the same row, the follow-up never runs alongside it.
import { isDatabaseUnreachable } from '../db/index.js';
import { claimDue } from './claim.js';
import { type Enqueued, type Executor, enqueue } from './enqueue.js';
import { describe } from './errors.js';
import { buildLanes } from './lanes.js';
import { complete } from './outcomes.js';
import { poll, schedulePoll } from './polling.js';
import { runJob, stopRunning } from './run.js';
import { type Schedule, startSchedule } from './schedules.js';
import type { QueueSettings, QueueState } from './state.js';
import { sweepFinished, sweepSchedule } from './sweep.js';
import type { Claim, EnqueueInput, JobHandler, JobKindOptions, JobQueueOptions } from './types.js';

export type {
  Claim,
  EnqueueInput,
  Job,
  JobContext,
  JobHandler,
  JobKindOptions,
  JobLane,
  JobLog,
  JobQueueOptions,
} from './types.js';

const DEFAULTS: QueueSettings = {
  pollMs: 1000,
  concurrency: 2,
  leaseMs: 60_000,
  backoffMs: 5_000,
  maxBackoffMs: 3_600_000,
  stopGraceMs: 10_000,
};

const settingsOf = (options: JobQueueOptions): QueueSettings => ({
  pollMs: options.pollMs ?? DEFAULTS.pollMs,
  concurrency: options.concurrency ?? DEFAULTS.concurrency,
  leaseMs: options.leaseMs ?? DEFAULTS.leaseMs,
  backoffMs: options.backoffMs ?? DEFAULTS.backoffMs,
  maxBackoffMs: options.maxBackoffMs ?? DEFAULTS.maxBackoffMs,
  stopGraceMs: options.stopGraceMs ?? DEFAULTS.stopGraceMs,
});

/**
 * A poll, heartbeat or schedule that failed: while the database cannot be reached, every poll of
 * every lane fails, so that is reported to `outages` (once per outage), the rest logged.
 */
const failureReporter =
  ({ log, outages }: JobQueueOptions): QueueState['warnFailed'] =>
  (fields, message, error) => {
    if (outages && isDatabaseUnreachable(error)) outages.failed(error);
    else log.warn({ ...fields, err: describe(error) }, message);
  };

/** The queue's parts share one state; this wires them to the methods its users call. */
export function createJobQueue(options: JobQueueOptions) {
  const { db, log } = options;
  const cfg = settingsOf(options);
  const state: QueueState = {
    db,
    log,
    cfg,
    handlers: new Map<string, JobHandler>(),
    kindOptions: new Map<string, JobKindOptions>(),
    ...buildLanes(cfg.concurrency, options.tenantShare, options.lanes ?? []),
    running: new Map(),
    started: false,
    pollTimer: undefined,
    warnFailed: failureReporter(options),
  };
  const schedules: Schedule[] = [sweepSchedule(db)];

  /**
   * Claims the next due job of one of `kinds` (by default every kind this process handles, of
   * every lane), or one whose lease expired; none of the tenants in `skipTenants`.
   */
  const claim = (kinds = [...state.handlers.keys()], skipTenants: string[] = []): Promise<Claim | undefined> =>
    claimDue(db, cfg.leaseMs, kinds, skipTenants);
  const run = (claimed: Claim): Promise<void> => runJob(state, claimed);

  return {
    /**
     * Adds a job, inside the caller's transaction when given one. With a `dedupeKey` that a
     * queued or running job of the tenant already holds, nothing is added and that job is named
     * (`followUp: true` when it was running and is now to run once more).
     */
    enqueue(executor: Executor, input: EnqueueInput): Promise<Enqueued> {
      return enqueue(executor, input, () => {
        if (state.started) setImmediate(() => void poll(state));
      });
    },

    register(kind: string, handler: JobHandler, options: JobKindOptions = {}): void {
      if (state.handlers.has(kind)) throw new Error(`a handler for job kind '${kind}' is already registered`);
      state.handlers.set(kind, handler);
      state.kindOptions.set(kind, options);
    },

    /** A task this process runs every `everyMs` while the queue is started (auto-sync, cleanup). */
    schedule(name: string, everyMs: number, task: () => Promise<void>): void {
      const entry: Schedule = { name, everyMs, task };
      schedules.push(entry);
      if (state.started) startSchedule(state, entry);
    },

    start(): void {
      if (state.started) return;
      state.started = true;
      for (const entry of schedules) startSchedule(state, entry);
      schedulePoll(state, 0);
    },

    /** Stops polling and waits for running handlers (aborting them after a grace period). */
    async stop(): Promise<void> {
      state.started = false;
      clearTimeout(state.pollTimer);
      for (const entry of schedules) clearInterval(entry.timer);
      await stopRunning(state);
    },

    /** For tests and tools: runs due jobs of every lane one after another until none is due. */
    async runUntilIdle(): Promise<void> {
      for (;;) {
        const claimed = await claim();
        if (!claimed) break;
        await run(claimed);
      }
      await Promise.all([...state.running.values()].map((r) => r.promise));
    },

    /** Low-level, for tests and tools: claim one due job without running it. */
    claim,
    /** Low-level: run a job claimed with `claim()` (its handler, then success or retry). */
    run,
    /** Low-level: record success of a claimed job; false when its lease passed to another worker. */
    complete: (claimed: Claim): Promise<boolean> => complete(db, claimed),

    /** Deletes finished jobs older than `olderThanMs`. */
    sweepFinished: (olderThanMs: number): Promise<number> => sweepFinished(db, olderThanMs),
  };
}

export type JobQueue = ReturnType<typeof createJobQueue>;
