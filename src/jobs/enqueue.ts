// Adding a job, inside the caller's transaction when given one; a dedupe key admits one
// queued-or-running job per tenant, which a second request joins or asks a follow-up of.
import { sql } from 'kysely';
import type { Db } from '../db/index.js';
import { newId } from '../lib/ids.js';
import type { EnqueueInput } from './types.js';

/** The queue: anything with `selectFrom` works as the handle, so enqueueing joins a caller's transaction. */
export type Executor = Pick<Db, 'insertInto' | 'selectFrom' | 'updateTable'>;

export interface Enqueued {
  id: string;
  deduplicated: boolean;
  followUp?: true;
}

const DEFAULT_MAX_ATTEMPTS = 5;

/**
 * Adds a job, inside the caller's transaction when given one, and tells `added` of it. With a
 * `dedupeKey` that a queued or running job of the tenant already holds, nothing is added and that
 * job is named (`followUp: true` when it was running and is now to run once more).
 */
export async function enqueue(executor: Executor, input: EnqueueInput, added: () => void): Promise<Enqueued> {
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
    added();
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
  if (!existing) return enqueue(executor, input, added);
  if (input.followUp && existing.status === 'running') {
    const marked = await executor
      .updateTable('jobs')
      .set({ follow_up: true })
      .where('tenant_id', '=', input.tenantId)
      .where('id', '=', existing.id)
      .where('status', '=', 'running')
      .executeTakeFirst();
    // It finished, or went back to the queue, in between: enqueue again.
    if (Number(marked.numUpdatedRows) === 0) return enqueue(executor, input, added);
    return { id: existing.id, deduplicated: true, followUp: true };
  }
  return { id: existing.id, deduplicated: true };
}
