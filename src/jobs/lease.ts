// Writes to a claimed job, each conditional on its lock token: a worker that lost its lease can
// never overwrite what the new owner did.
import { sql, type UpdateObject } from 'kysely';
import type { Database, Db, JobStatus } from '../db/index.js';
import type { Claim } from './types.js';

/** Writes to a claimed job only while this worker still holds its lease; false when it does not. */
export async function updateHeld(db: Db, claimed: Claim, changes: UpdateObject<Database, 'jobs'>): Promise<boolean> {
  return (await updateHeldStatus(db, claimed, changes)) !== undefined;
}

/** As `updateHeld`, answering the status written (undefined when the lease had passed on). */
export async function updateHeldStatus(
  db: Db,
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

/** Renews the lease for `leaseMs` from now; false when it had passed to another worker. */
export function heartbeat(db: Db, leaseMs: number, claimed: Claim): Promise<boolean> {
  return updateHeld(db, claimed, { locked_until: sql`now() + ${`${leaseMs} milliseconds`}::interval` });
}
