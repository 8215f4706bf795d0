// Claiming: one statement marks the next due job `running` under a fresh lease and lock token.
import { sql } from 'kysely';
import type { Db } from '../db/index.js';
import { newId } from '../lib/ids.js';
import type { Claim } from './types.js';

type JobRow = {
  id: string;
  kind: string;
  tenant_id: string;
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
  lock_token: string;
};

/**
 * Claims the next due job of one of `kinds`, or one whose lease expired; none of the tenants in
 * `skipTenants` (those at their lane's cap). Oldest due first among the others.
 */
export async function claimDue(
  db: Db,
  leaseMs: number,
  kinds: string[],
  skipTenants: string[] = [],
): Promise<Claim | undefined> {
  if (kinds.length === 0) return undefined;
  const token = newId();
  const result = await sql<JobRow>`
    update jobs set
      status = 'running',
      attempts = attempts + 1,
      locked_until = now() + ${`${leaseMs} milliseconds`}::interval,
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
