// The end of a run, written under the lease: success, a retry after an exponential backoff,
// failure for good on the last attempt, or the job released to the queue when its worker stops.
import { sql, type UpdateObject } from 'kysely';
import type { Database, Db, JobStatus } from '../db/index.js';
import { describe } from './errors.js';
import { updateHeld, updateHeldStatus } from './lease.js';
import type { Claim } from './types.js';

export interface BackoffSettings {
  /** First retry delay; doubles with each attempt. */
  backoffMs: number;
  maxBackoffMs: number;
}

/** The delay before retrying a job whose run number `attempts` failed. */
export const backoff = (cfg: BackoffSettings, attempts: number) =>
  Math.min(cfg.backoffMs * 2 ** Math.max(attempts - 1, 0), cfg.maxBackoffMs);

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

/**
 * Records success, or with a follow-up asked for, queues the job again, due at once with its
 * attempts unused. False when the lease had passed to another worker (nothing is written).
 */
export function complete(db: Db, claimed: Claim): Promise<boolean> {
  return updateHeld(db, claimed, { ...endedOrFollowedUp('succeeded'), last_error: null });
}

/** A failed run: retried, or on its last attempt failed for good (unless a follow-up was asked for). */
export async function fail(
  db: Db,
  cfg: BackoffSettings,
  claimed: Claim,
  error: unknown,
): Promise<'retry' | 'failed' | 'lost'> {
  const message = describe(error);
  if (claimed.job.attempts >= claimed.job.maxAttempts) {
    const status = await updateHeldStatus(db, claimed, { ...endedOrFollowedUp('failed'), last_error: message });
    if (status === undefined) return 'lost';
    return status === 'failed' ? 'failed' : 'retry';
  }
  const held = await updateHeld(db, claimed, {
    status: 'queued',
    // The retry runs the job again anyway.
    follow_up: false,
    locked_until: null,
    lock_token: null,
    last_error: message,
    run_at: sql`now() + ${`${backoff(cfg, claimed.job.attempts)} milliseconds`}::interval`,
  });
  if (!held) return 'lost';
  return 'retry';
}

/**
 * A job stopped by its worker (the server is stopping) goes back to the queue, due at once, and
 * the attempt is not counted: a restart is not the job's failure, and restarts must not use its
 * attempts up. False when the lease had passed on (a lost lease aborts the handler too).
 */
export function release(db: Db, claimed: Claim, error: unknown): Promise<boolean> {
  return updateHeld(db, claimed, {
    status: 'queued',
    follow_up: false,
    attempts: sql`greatest(attempts - 1, 0)`,
    locked_until: null,
    lock_token: null,
    last_error: describe(error),
    run_at: sql`now()`,
  });
}
