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
import { sql, type UpdateObject } from 'kysely';
import type { Db } from '../db/client.js';
import { isDatabaseUnreachable } from '../db/errors.js';
import type { DatabaseOutages } from '../db/outage.js';
import type { Database, JobStatus } from '../db/schema.js';
import { newId } from '../lib/ids.js';
import { type JobOutcome, recordJob } from '../observability/metrics.js';
import { withSpan } from '../observability/tracing.js';

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

/** The queue: anything with `selectFrom` works as the handle, so enqueueing joins a caller's transaction. */
type Executor = Pick<Db, 'insertInto' | 'selectFrom' | 'updateTable'>;

const DEFAULTS = {
  pollMs: 1000,
  concurrency: 2,
  leaseMs: 60_000,
  backoffMs: 5_000,
  maxBackoffMs: 3_600_000,
  stopGraceMs: 10_000,
};
const DEFAULT_MAX_ATTEMPTS = 5;
const MAX_ERROR_LENGTH = 2000;
const FINISHED_RETENTION_MS = 7 * 24 * 3_600_000;

type JobRow = {
  id: string;
  kind: string;
  tenant_id: string;
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
  lock_token: string;
};

interface Lane {
  name: string;
  concurrency: number;
  tenantConcurrency: number | undefined;
  tenantShare: number | undefined;
  /** A poll of this lane is under way: another one would only claim past its concurrency. */
  polling: boolean;
}

/** A claimed job and the token that proves this worker still owns it. */
export interface Claim {
  job: Job;
  token: string;
}

export function createJobQueue(options: JobQueueOptions) {
  const { db, log } = options;
  // A poll, heartbeat or schedule that failed: while the database cannot be reached, every poll
  // of every lane fails, so that is reported to `outages` (once per outage), the rest logged.
  const warnFailed = (fields: object, message: string, error: unknown) => {
    if (options.outages && isDatabaseUnreachable(error)) options.outages.failed(error);
    else log.warn({ ...fields, err: describe(error) }, message);
  };
  const cfg = {
    pollMs: options.pollMs ?? DEFAULTS.pollMs,
    concurrency: options.concurrency ?? DEFAULTS.concurrency,
    leaseMs: options.leaseMs ?? DEFAULTS.leaseMs,
    backoffMs: options.backoffMs ?? DEFAULTS.backoffMs,
    maxBackoffMs: options.maxBackoffMs ?? DEFAULTS.maxBackoffMs,
    stopGraceMs: options.stopGraceMs ?? DEFAULTS.stopGraceMs,
  };
  if (options.tenantShare !== undefined && !(Number.isInteger(options.tenantShare) && options.tenantShare >= 1)) {
    throw new Error(`the default job lane needs a tenant share of at least 1, got ${options.tenantShare}`);
  }
  const handlers = new Map<string, JobHandler>();
  const kindOptions = new Map<string, JobKindOptions>();
  const defaultLane: Lane = {
    name: 'default',
    concurrency: cfg.concurrency,
    tenantConcurrency: undefined,
    tenantShare: options.tenantShare ?? Math.ceil(cfg.concurrency / 2),
    polling: false,
  };
  const lanes = [defaultLane];
  const laneOfKind = new Map<string, Lane>();
  for (const { name, kinds, concurrency, tenantConcurrency, tenantShare } of options.lanes ?? []) {
    if (!(Number.isInteger(concurrency) && concurrency >= 1)) {
      throw new Error(`job lane '${name}' needs a concurrency of at least 1, got ${concurrency}`);
    }
    if (tenantConcurrency !== undefined && !(Number.isInteger(tenantConcurrency) && tenantConcurrency >= 1)) {
      throw new Error(`job lane '${name}' needs a tenant concurrency of at least 1, got ${tenantConcurrency}`);
    }
    if (tenantShare !== undefined && !(Number.isInteger(tenantShare) && tenantShare >= 1)) {
      throw new Error(`job lane '${name}' needs a tenant share of at least 1, got ${tenantShare}`);
    }
    const lane: Lane = { name, concurrency, tenantConcurrency, tenantShare, polling: false };
    lanes.push(lane);
    for (const kind of kinds) {
      if (laneOfKind.has(kind)) throw new Error(`job kind '${kind}' is named by two lanes`);
      laneOfKind.set(kind, lane);
    }
  }
  const laneOf = (kind: string) => laneOfKind.get(kind) ?? defaultLane;
  const running = new Map<string, { promise: Promise<void>; abort: AbortController; lane: Lane; tenantId: string }>();
  const schedules: { name: string; everyMs: number; task: () => Promise<void>; timer?: NodeJS.Timeout }[] = [];
  // Finished jobs are kept a week for inspection, then swept.
  schedules.push({
    name: 'sweep-finished-jobs',
    everyMs: 3_600_000,
    task: async () => {
      await sweepFinished(FINISHED_RETENTION_MS);
    },
  });
  let started = false;
  let pollTimer: NodeJS.Timeout | undefined;

  const backoff = (attempts: number) => Math.min(cfg.backoffMs * 2 ** Math.max(attempts - 1, 0), cfg.maxBackoffMs);

  /**
   * Claims the next due job of one of `kinds` (by default every kind this process handles, of
   * every lane), or one whose lease expired; none of the tenants in `skipTenants` (those at their
   * lane's cap). Oldest due first among the others.
   */
  async function claim(kinds = [...handlers.keys()], skipTenants: string[] = []): Promise<Claim | undefined> {
    if (kinds.length === 0) return undefined;
    const token = newId();
    const result = await sql<JobRow>`
      update jobs set
        status = 'running',
        attempts = attempts + 1,
        locked_until = now() + ${`${cfg.leaseMs} milliseconds`}::interval,
        lock_token = ${token},
        updated_at = now()
      where id = (
        select id from jobs
        where kind in (${sql.join(kinds)})
          and ((status = 'queued' and run_at <= now()) or (status = 'running' and locked_until < now()))
          and tenant_id <> all(${skipTenants}::text[])
        order by run_at, id
        for update skip locked
        limit 1
      )
      returning id, kind, tenant_id, payload, attempts, max_attempts, lock_token
    `.execute(db);
    const row = result.rows[0];
    if (!row) return undefined;
    return {
      token,
      job: {
        id: row.id,
        kind: row.kind,
        tenantId: row.tenant_id,
        payload: row.payload ?? {},
        attempts: row.attempts,
        maxAttempts: row.max_attempts,
      },
    };
  }

  /** Writes to a claimed job only while this worker still holds its lease; false when it does not. */
  async function updateHeld(claimed: Claim, changes: UpdateObject<Database, 'jobs'>): Promise<boolean> {
    return (await updateHeldStatus(claimed, changes)) !== undefined;
  }

  /** As `updateHeld`, answering the status written (undefined when the lease had passed on). */
  async function updateHeldStatus(
    claimed: Claim,
    changes: UpdateObject<Database, 'jobs'>,
  ): Promise<JobStatus | undefined> {
    const row = await db
      .updateTable('jobs')
      .set({ ...changes, updated_at: sql`now()` })
      .where('id', '=', claimed.job.id)
      .where('lock_token', '=', claimed.token)
      .where('status', '=', 'running')
      .returning('status')
      .executeTakeFirst();
    return row?.status;
  }

  /**
   * The end of a run as `status`, or, when a follow-up was asked for (`follow_up`), the job queued
   * again in its place, due at once with its attempts unused: the run asked for comes after this
   * one, whichever way this one ended.
   */
  const endedOrFollowedUp = (status: 'succeeded' | 'failed'): UpdateObject<Database, 'jobs'> => ({
    status: sql<JobStatus>`case when follow_up then 'queued' else ${status} end`,
    attempts: sql<number>`case when follow_up then 0 else attempts end`,
    run_at: sql<Date>`case when follow_up then now() else run_at end`,
    lock_token: sql<string | null>`case when follow_up then null else lock_token end`,
    finished_at: sql<Date | null>`case when follow_up then null else now() end`,
    follow_up: false,
    locked_until: null,
  });

  function heartbeat(claimed: Claim): Promise<boolean> {
    return updateHeld(claimed, { locked_until: sql`now() + ${`${cfg.leaseMs} milliseconds`}::interval` });
  }

  /**
   * Records success, or with a follow-up asked for, queues the job again, due at once with its
   * attempts unused. False when the lease had passed to another worker (nothing is written).
   */
  function complete(claimed: Claim): Promise<boolean> {
    return updateHeld(claimed, { ...endedOrFollowedUp('succeeded'), last_error: null });
  }

  /** A failed run: retried, or on its last attempt failed for good (unless a follow-up was asked for). */
  async function fail(claimed: Claim, error: unknown): Promise<'retry' | 'failed' | 'lost'> {
    const message = describe(error);
    if (claimed.job.attempts >= claimed.job.maxAttempts) {
      const status = await updateHeldStatus(claimed, { ...endedOrFollowedUp('failed'), last_error: message });
      if (status === undefined) return 'lost';
      return status === 'failed' ? 'failed' : 'retry';
    }
    const held = await updateHeld(claimed, {
      status: 'queued',
      // The retry runs the job again anyway.
      follow_up: false,
      locked_until: null,
      lock_token: null,
      last_error: message,
      run_at: sql`now() + ${`${backoff(claimed.job.attempts)} milliseconds`}::interval`,
    });
    if (!held) return 'lost';
    return 'retry';
  }

  /**
   * A job stopped by its worker (the server is stopping) goes back to the queue, due at once, and
   * the attempt is not counted: a restart is not the job's failure, and restarts must not use its
   * attempts up. False when the lease had passed on (a lost lease aborts the handler too).
   */
  function release(claimed: Claim, error: unknown): Promise<boolean> {
    return updateHeld(claimed, {
      status: 'queued',
      follow_up: false,
      attempts: sql`greatest(attempts - 1, 0)`,
      locked_until: null,
      lock_token: null,
      last_error: describe(error),
      run_at: sql`now()`,
    });
  }

  async function failedForGood(job: Job, error: unknown): Promise<void> {
    const hook = kindOptions.get(job.kind)?.onFailed;
    if (!hook) return;
    try {
      await hook(job, describe(error));
    } catch (hookError) {
      log.error({ job_id: job.id, err: describe(hookError) }, 'job failure hook failed');
    }
  }

  /** Runs one claimed job to its end: handler, lease renewal, then success, retry or failure. */
  async function run(claimed: Claim): Promise<void> {
    const { job } = claimed;
    const abort = new AbortController();
    const handler = handlers.get(job.kind);
    const renew = async () => {
      if (abort.signal.aborted) return;
      if (!(await heartbeat(claimed))) abort.abort(new Error('the job lease passed to another worker'));
    };
    const timer = setInterval(
      () => {
        renew().catch((error) => warnFailed({ job_id: job.id }, 'job heartbeat failed', error));
      },
      Math.max(Math.floor(cfg.leaseMs / 3), 10),
    );
    timer.unref();
    const entry = { abort, promise: Promise.resolve(), lane: laneOf(job.kind), tenantId: job.tenantId };
    running.set(job.id, entry);
    const started = performance.now();
    const ended = (outcome: JobOutcome) => recordJob(job.kind, outcome, (performance.now() - started) / 1000);
    try {
      if (job.attempts > job.maxAttempts) {
        // Its worker died on every attempt (the lease expired each time): stop trying.
        const error = new Error('the job was interrupted on every attempt (its worker stopped responding)');
        if ((await fail(claimed, error)) === 'failed') await failedForGood(job, error);
        return;
      }
      try {
        if (!handler) throw new Error(`no handler for job kind '${job.kind}'`);
        await withSpan(
          `job ${job.kind}`,
          { 'workspace.job_kind': job.kind, 'workspace.job_id': job.id, 'workspace.tenant_id': job.tenantId },
          () => handler(job, { heartbeat: renew, signal: abort.signal }),
          { root: true },
        );
      } catch (error) {
        clearInterval(timer);
        if (abort.signal.aborted) {
          ended('stopped');
          if (await release(claimed, error)) log.info({ job_id: job.id, kind: job.kind }, 'job stopped; queued again');
          return;
        }
        const outcome = await fail(claimed, error);
        ended(outcome);
        const fields = { job_id: job.id, kind: job.kind, attempt: job.attempts, err: describe(error) };
        if (outcome === 'failed') {
          log.error(fields, 'job failed for good');
          await failedForGood(job, error);
        } else if (outcome === 'retry') log.warn(fields, 'job failed; will retry');
        return;
      }
      clearInterval(timer);
      const completed = await complete(claimed);
      ended(completed ? 'succeeded' : 'lost');
      if (!completed) log.warn({ job_id: job.id }, 'job finished after its lease passed on');
    } finally {
      clearInterval(timer);
      running.delete(job.id);
    }
  }

  /** Claims and starts jobs while a lane has free slots; the lanes fill theirs side by side. */
  async function poll(): Promise<void> {
    await Promise.all(lanes.map(fill));
  }

  async function fill(lane: Lane): Promise<void> {
    if (lane.polling) return;
    lane.polling = true;
    const kinds = [...handlers.keys()].filter((kind) => laneOf(kind) === lane);
    const busy = () => [...running.values()].filter((r) => r.lane === lane).length;
    // The tenants already running `limit` of this lane's jobs.
    const runningAtLeast = (limit: number | undefined) => {
      if (limit === undefined) return [];
      const counts = new Map<string, number>();
      for (const r of running.values()) {
        if (r.lane === lane) counts.set(r.tenantId, (counts.get(r.tenantId) ?? 0) + 1);
      }
      return [...counts].filter(([, n]) => n >= limit).map(([tenantId]) => tenantId);
    };
    try {
      while (started && busy() < lane.concurrency) {
        // Tenants under their share first; a tenant past it (under its cap) when no other's is due.
        const capped = runningAtLeast(lane.tenantConcurrency);
        const shared = runningAtLeast(lane.tenantShare).filter((tenantId) => !capped.includes(tenantId));
        const claimed =
          (await claim(kinds, [...capped, ...shared])) ?? (shared.length > 0 ? await claim(kinds, capped) : undefined);
        if (!claimed) break;
        const entry = run(claimed).catch((error) =>
          log.error({ job_id: claimed.job.id, err: describe(error) }, 'job bookkeeping failed'),
        );
        const slot = running.get(claimed.job.id);
        if (slot) slot.promise = entry;
      }
    } catch (error) {
      warnFailed({ lane: lane.name }, 'job poll failed', error);
    } finally {
      lane.polling = false;
    }
  }

  function schedulePoll(delay: number) {
    if (!started) return;
    clearTimeout(pollTimer);
    pollTimer = setTimeout(async () => {
      await poll();
      schedulePoll(cfg.pollMs);
    }, delay);
    pollTimer.unref();
  }

  /**
   * Adds a job, inside the caller's transaction when given one. With a `dedupeKey` that a
   * queued or running job of the tenant already holds, nothing is added and that job is named
   * (`followUp: true` when it was running and is now to run once more).
   */
  async function enqueue(
    executor: Executor,
    input: EnqueueInput,
  ): Promise<{ id: string; deduplicated: boolean; followUp?: true }> {
    const id = newId();
    const inserted = await executor
      .insertInto('jobs')
      .values({
        id,
        tenant_id: input.tenantId,
        kind: input.kind,
        payload: JSON.stringify(input.payload ?? {}),
        dedupe_key: input.dedupeKey ?? null,
        max_attempts: input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        ...(input.runAt ? { run_at: input.runAt } : {}),
      })
      // The conflict target names the partial unique index `jobs_dedupe` by its columns and predicate.
      .onConflict((oc) =>
        oc
          .columns(['tenant_id', 'dedupe_key'])
          .where(sql<boolean>`dedupe_key is not null and status in ('queued', 'running')`)
          .doNothing(),
      )
      .returning('id')
      .executeTakeFirst();
    if (inserted) {
      if (started) setImmediate(() => void poll());
      return { id: inserted.id, deduplicated: false };
    }
    const existing = await executor
      .selectFrom('jobs')
      .select(['id', 'status'])
      .where('tenant_id', '=', input.tenantId)
      .where('dedupe_key', '=', input.dedupeKey ?? '')
      .where('status', 'in', ['queued', 'running'])
      .executeTakeFirst();
    // The holder finished between the insert and this read: enqueue again.
    if (!existing) return enqueue(executor, input);
    if (input.followUp && existing.status === 'running') {
      const marked = await executor
        .updateTable('jobs')
        .set({ follow_up: true })
        .where('tenant_id', '=', input.tenantId)
        .where('id', '=', existing.id)
        .where('status', '=', 'running')
        .executeTakeFirst();
      // It finished, or went back to the queue, in between: enqueue again.
      if (Number(marked.numUpdatedRows) === 0) return enqueue(executor, input);
      return { id: existing.id, deduplicated: true, followUp: true };
    }
    return { id: existing.id, deduplicated: true };
  }

  return {
    enqueue,

    register(kind: string, handler: JobHandler, options: JobKindOptions = {}): void {
      if (handlers.has(kind)) throw new Error(`a handler for job kind '${kind}' is already registered`);
      handlers.set(kind, handler);
      kindOptions.set(kind, options);
    },

    /** A task this process runs every `everyMs` while the queue is started (auto-sync, cleanup). */
    schedule(name: string, everyMs: number, task: () => Promise<void>): void {
      const entry: (typeof schedules)[number] = { name, everyMs, task };
      schedules.push(entry);
      if (started) startSchedule(entry);
    },

    start(): void {
      if (started) return;
      started = true;
      for (const entry of schedules) startSchedule(entry);
      schedulePoll(0);
    },

    /** Stops polling and waits for running handlers (aborting them after a grace period). */
    async stop(): Promise<void> {
      started = false;
      clearTimeout(pollTimer);
      for (const entry of schedules) clearInterval(entry.timer);
      const all = () => Promise.all([...running.values()].map((r) => r.promise));
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), cfg.stopGraceMs);
        timer.unref();
      });
      const outcome = await Promise.race([all().then(() => 'done' as const), graceOver]);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        for (const r of running.values()) r.abort.abort(new Error('the server is stopping'));
        await all();
      }
    },

    /** For tests and tools: runs due jobs of every lane one after another until none is due. */
    async runUntilIdle(): Promise<void> {
      for (;;) {
        const claimed = await claim();
        if (!claimed) break;
        await run(claimed);
      }
      await Promise.all([...running.values()].map((r) => r.promise));
    },

    /** Low-level, for tests and tools: claim one due job without running it. */
    claim,
    /** Low-level: run a job claimed with `claim()` (its handler, then success or retry). */
    run,
    /** Low-level: record success of a claimed job; false when its lease passed to another worker. */
    complete,

    sweepFinished,
  };

  /** Deletes finished jobs older than `olderThanMs`. */
  async function sweepFinished(olderThanMs: number): Promise<number> {
    const result = await db
      .deleteFrom('jobs')
      .where('status', 'in', ['succeeded', 'failed'])
      .where('finished_at', '<', sql<Date>`now() - ${`${olderThanMs} milliseconds`}::interval`)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  function startSchedule(entry: (typeof schedules)[number]) {
    clearInterval(entry.timer);
    let busy = false;
    entry.timer = setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        await entry.task();
      } catch (error) {
        warnFailed({ schedule: entry.name }, 'scheduled task failed', error);
      } finally {
        busy = false;
      }
    }, entry.everyMs);
    entry.timer.unref();
  }
}

function describe(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}…` : text;
}

export type JobQueue = ReturnType<typeof createJobQueue>;
