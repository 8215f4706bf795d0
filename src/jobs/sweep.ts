// Finished jobs are kept a week for inspection, then swept.
import { sql } from 'kysely';
import type { Db } from '../db/index.js';
import type { Schedule } from './schedules.js';

const FINISHED_RETENTION_MS = 7 * 24 * 3_600_000;

/** Deletes finished jobs older than `olderThanMs`. */
export async function sweepFinished(db: Db, olderThanMs: number): Promise<number> {
  const result = await db
    .deleteFrom('jobs')
    .where('status', 'in', ['succeeded', 'failed'])
    .where('finished_at', '<', sql<Date>`now() - ${`${olderThanMs} milliseconds`}::interval`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The hourly sweep of jobs finished more than a week ago. */
export const sweepSchedule = (db: Db): Schedule => ({
  name: 'sweep-finished-jobs',
  everyMs: 3_600_000,
  task: async () => {
    await sweepFinished(db, FINISHED_RETENTION_MS);
  },
});
