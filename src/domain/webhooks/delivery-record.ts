// Recording an attempt: the delivery's new state and its consequence (done, a retry queued, given
// up, the endpoint disabled after failing too long) written in one transaction.
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import type { JobLog, JobQueue } from '../../jobs/queue.js';
import type { Outcome } from './delivery-attempt.js';
import { WEBHOOK_DELIVERY_JOB, WEBHOOK_JOB_MAX_ATTEMPTS } from './events.js';
import { type RetryPolicy, retryDelay } from './retry-policy.js';

export interface RecordDeps {
  db: Db;
  jobs: Pick<JobQueue, 'enqueue'>;
  policy: RetryPolicy;
  now: () => Date;
  log?: Pick<JobLog, 'warn'> | undefined;
}

/** One attempt of the delivery scheduled as `seq`, made `at`. */
interface Attempt {
  tenantId: string;
  deliveryId: string;
  seq: number;
  outcome: Outcome;
  at: Date;
}

type Trx = Transaction<Database>;

/** The delivery, still pending as `seq`, locked for the attempt's record. */
interface PendingDelivery {
  endpoint_id: string;
  attempts: number;
  retry_until: Date;
}

/** The attempt's fields of the delivery's row. */
interface AttemptFields {
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: Date;
  updated_at: Date;
}

/** Writes the attempt and its consequence (done, retry, given up, endpoint disabled) at once. */
export async function recordAttempt(
  deps: RecordDeps,
  tenantId: string,
  deliveryId: string,
  seq: number,
  outcome: Outcome,
): Promise<void> {
  const attempt: Attempt = { tenantId, deliveryId, seq, outcome, at: deps.now() };
  const disabled = await deps.db.transaction().execute(async (trx) => {
    const delivery = await lockPending(trx, attempt);
    if (!delivery) return undefined;
    const attempts = Number(delivery.attempts) + 1;
    const fields: AttemptFields = {
      attempts,
      last_status_code: outcome.statusCode,
      last_error: outcome.error,
      last_attempt_at: attempt.at,
      updated_at: attempt.at,
    };
    if (outcome.ok) {
      await recordSuccess(trx, attempt, delivery, fields);
      return undefined;
    }
    return recordFailure(trx, deps, attempt, delivery, fields);
  });
  if (disabled) {
    deps.log?.warn({ tenant_id: tenantId, endpoint_id: disabled }, 'webhook endpoint disabled after failing');
  }
}

/**
 * Locks the endpoint, then the delivery if it is still pending as the attempt's `seq`; undefined
 * when it was deleted with its endpoint, or replayed, while the attempt ran.
 */
async function lockPending(trx: Trx, { tenantId, deliveryId, seq }: Attempt): Promise<PendingDelivery | undefined> {
  // The endpoint is locked before its delivery, in the order of the endpoint's delete (the
  // endpoint, then its deliveries by cascade): the other order deadlocked with a delete made
  // while an attempt was being recorded, and one of the two failed.
  const owner = await trx
    .selectFrom('webhook_deliveries')
    .select('endpoint_id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', deliveryId)
    .executeTakeFirst();
  if (!owner) return undefined; // deleted with its endpoint while the attempt ran
  await trx
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', owner.endpoint_id)
    .forNoKeyUpdate()
    .execute();
  return trx
    .selectFrom('webhook_deliveries')
    .select(['endpoint_id', 'attempts', 'retry_until'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', deliveryId)
    .where('schedule_seq', '=', seq)
    .where('status', '=', 'pending')
    .forUpdate()
    .executeTakeFirst(); // undefined: replayed or deleted while the attempt ran
}

/** Delivered: the delivery succeeded, and the endpoint's failure streak, if any, ends. */
async function recordSuccess(
  trx: Trx,
  { tenantId, deliveryId, at }: Attempt,
  delivery: PendingDelivery,
  fields: AttemptFields,
): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set({ ...fields, status: 'succeeded', next_retry_at: null, delivered_at: at })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', deliveryId)
    .execute();
  await trx
    .updateTable('webhook_endpoints')
    .set({ failing_since: null })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', delivery.endpoint_id)
    .where('failing_since', 'is not', null)
    .execute();
}

/**
 * Not delivered: a retry is queued while the window lasts and the endpoint is not disabled, else
 * the delivery failed. Answers the endpoint's id when this failure disabled it.
 */
async function recordFailure(
  trx: Trx,
  deps: RecordDeps,
  attempt: Attempt,
  delivery: PendingDelivery,
  fields: AttemptFields,
): Promise<string | undefined> {
  const { tenantId, deliveryId, seq, at } = attempt;
  const disable = await extendFailureStreak(trx, deps.policy, attempt, delivery.endpoint_id);
  const delay = retryDelay(deps.policy, fields.attempts);
  const retry = !disable && at.getTime() + delay <= delivery.retry_until.getTime();
  await trx
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      ...fields,
      status: retry ? 'pending' : 'failed',
      next_retry_at: retry ? new Date(at.getTime() + delay) : null,
      schedule_seq: retry ? eb('schedule_seq', '+', 1) : eb.ref('schedule_seq'),
    }))
    .where('tenant_id', '=', tenantId)
    .where('id', '=', deliveryId)
    .execute();
  if (retry) {
    await deps.jobs.enqueue(trx, {
      kind: WEBHOOK_DELIVERY_JOB,
      tenantId,
      payload: { delivery_id: deliveryId, seq: seq + 1 },
      runAt: new Date(Date.now() + delay),
      maxAttempts: WEBHOOK_JOB_MAX_ATTEMPTS,
    });
  }
  return disable ? delivery.endpoint_id : undefined;
}

/**
 * Counts the failure in the endpoint's streak, and disables an enabled endpoint whose streak has
 * lasted `disableAfterMs`; true when it did.
 */
async function extendFailureStreak(
  trx: Trx,
  policy: RetryPolicy,
  { tenantId, outcome, at }: Attempt,
  endpointId: string,
): Promise<boolean> {
  // The failure streak starts at the first failure after the last success.
  const endpoint = await trx
    .updateTable('webhook_endpoints')
    .set((eb) => ({ failing_since: eb.fn.coalesce('failing_since', eb.val(at)) }))
    .where('tenant_id', '=', tenantId)
    .where('id', '=', endpointId)
    .returning(['failing_since', 'enabled'])
    .executeTakeFirstOrThrow();
  const failingSince = endpoint.failing_since ?? at;
  const disable = endpoint.enabled && at.getTime() - failingSince.getTime() >= policy.disableAfterMs;
  if (!disable) return false;
  const days = Math.round(policy.disableAfterMs / 86_400_000);
  await trx
    .updateTable('webhook_endpoints')
    .set({
      enabled: false,
      disabled_reason:
        `Every delivery attempt failed for ${days} days (since ${failingSince.toISOString()}); ` +
        `the last one: ${outcome.error ?? 'no answer'}`.slice(0, 1000),
      updated_at: at,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', endpointId)
    .execute();
  return true;
}
