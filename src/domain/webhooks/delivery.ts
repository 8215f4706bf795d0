// The delivery job: one attempt to POST one event to one endpoint, signed per
// Standard Webhooks, then its outcome written with the next step in the same transaction.
//
// - A job carries `{delivery_id, seq}`; only the job whose `seq` is the delivery's
//   `schedule_seq` may attempt it. A retry or a replay bumps the number, so a superseded job
//   that still runs finds itself stale and stops: one attempt in flight per delivery.
// - The endpoint's failures (non-2xx, 3xx included since redirects are not followed; timeouts,
//   network errors, an address refused by the SSRF guard) are not job failures: the job
//   succeeds, and the retry is a new job with its own `runAt`, written in the transaction that
//   records the failed attempt. A restart between the two loses nothing: the retry is a row.
// - Our own failures (the database) throw, and the queue retries the job, which attempts again:
//   delivery is at least once, and `webhook-id` (the delivery id) lets receivers drop repeats.
// - `now` is the policy clock (retry window, the 5-day disabling, the signed timestamp), and it
//   can be injected; the queue itself schedules on the database clock, so a retry's `runAt` is
//   real time plus the delay.
import { sql } from 'kysely';
import type { Db } from '../../db/client.js';
import type { Job, JobContext, JobLog, JobQueue } from '../../jobs/queue.js';
import { createSecretBox, type SecretBox, SecretBoxError } from '../../lib/secret-box.js';
import { OutboundRequestError, safeRequest } from '../../lib/ssrf.js';
import { observeWebhookAttempt } from '../../observability/webhooks.js';
import { WEBHOOK_DELIVERY_JOB, WEBHOOK_JOB_MAX_ATTEMPTS } from './events.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy, retryDelay } from './retry-policy.js';
import { signatureHeaders } from './signing.js';

export interface WebhookDeliveryOptions {
  db: Db;
  /** Opens signing secrets sealed at rest (SECRETS_KEY). */
  secrets?: SecretBox;
  allowPrivateTargets: boolean;
  /** One attempt may take this long, connection to last byte. */
  timeoutMs: number;
  retry?: Partial<RetryPolicy>;
  now?: () => Date;
  log?: Pick<JobLog, 'warn'>;
}

/** Bytes of a receiver's answer read at most; it is not kept, only its status. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const MAX_ERROR_LENGTH = 500;
const USER_AGENT = 'Workspace-Webhooks/1.0';

interface Outcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
}

/** Finished deliveries (and events no delivery needs any more) are kept this long for the log. */
export const DELIVERY_LOG_RETENTION_MS = 30 * 86_400_000;

export function registerWebhookDelivery(jobs: JobQueue, options: WebhookDeliveryOptions): void {
  jobs.register(WEBHOOK_DELIVERY_JOB, createWebhookDeliveryHandler(jobs, options));
  jobs.schedule('sweep-webhook-log', 3_600_000, async () => {
    await sweepWebhookLog(options.db, DELIVERY_LOG_RETENTION_MS);
  });
}

/**
 * Deletes succeeded and failed deliveries last changed more than `olderThanMs` ago, then the
 * events left without any delivery. Maintenance across all tenants, like the queue's own sweep;
 * a pending delivery is never touched.
 */
export async function sweepWebhookLog(db: Db, olderThanMs: number): Promise<{ deliveries: number; events: number }> {
  const cutoff = sql<Date>`now() - ${`${olderThanMs} milliseconds`}::interval`;
  const deliveries = await db
    .deleteFrom('webhook_deliveries')
    .where('status', 'in', ['succeeded', 'failed'])
    .where('updated_at', '<=', cutoff)
    .executeTakeFirst();
  const events = await db
    .deleteFrom('webhook_events')
    .where('created_at', '<=', cutoff)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(selectFrom('webhook_deliveries as d').select('d.id').whereRef('d.event_id', '=', 'webhook_events.id')),
      ),
    )
    .executeTakeFirst();
  return { deliveries: Number(deliveries.numDeletedRows), events: Number(events.numDeletedRows) };
}

export function createWebhookDeliveryHandler(jobs: Pick<JobQueue, 'enqueue'>, options: WebhookDeliveryOptions) {
  const { db } = options;
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
  const now = options.now ?? (() => new Date());
  const secrets = options.secrets ?? createSecretBox(undefined);

  async function attempt(url: string, headers: Record<string, string>, body: string, signal: AbortSignal) {
    try {
      const response = await safeRequest(url, {
        allowPrivate: options.allowPrivateTargets,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
        body,
        timeoutMs: options.timeoutMs,
        // Only the status counts: a long answer is read to its first 64 KiB, and is a success if 2xx.
        maxBytes: MAX_RESPONSE_BYTES,
        truncate: true,
        maxRedirects: 0,
        signal,
      });
      const ok = response.status >= 200 && response.status < 300;
      const redirect = response.status >= 300 && response.status < 400;
      return {
        ok,
        statusCode: response.status,
        error: ok
          ? null
          : redirect
            ? `The endpoint answered ${response.status}; redirects are not followed.`
            : `The endpoint answered ${response.status}.`,
      } satisfies Outcome;
    } catch (error) {
      // Stopping or losing the lease is ours, not the endpoint's: the queue runs the job again.
      if (signal.aborted || !(error instanceof OutboundRequestError)) throw error;
      return { ok: false, statusCode: null, error: error.message.slice(0, MAX_ERROR_LENGTH) } satisfies Outcome;
    }
  }

  return async function deliver(job: Job, ctx: JobContext): Promise<void> {
    const tenantId = job.tenantId;
    const deliveryId = String(job.payload.delivery_id ?? '');
    const seq = Number(job.payload.seq ?? 0);
    const row = await db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .innerJoin('webhook_events as ev', 'ev.id', 'd.event_id')
      .select([
        'd.status',
        'd.schedule_seq',
        'ev.payload',
        'e.id as endpoint_id',
        'e.url',
        'e.enabled',
        'e.secret',
        'e.previous_secret',
        'e.previous_secret_expires_at',
      ])
      .where('d.tenant_id', '=', tenantId)
      .where('d.id', '=', deliveryId)
      .executeTakeFirst();
    // Deleted with its endpoint, finished, or superseded by a replay or a later retry.
    if (row?.status !== 'pending' || row.schedule_seq !== seq) return;

    if (!row.enabled) {
      await db
        .updateTable('webhook_deliveries')
        .set({ status: 'failed', next_retry_at: null, last_error: 'The endpoint is disabled.', updated_at: now() })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', deliveryId)
        .where('schedule_seq', '=', seq)
        .where('status', '=', 'pending')
        .execute();
      return;
    }

    const attemptedAt = now();
    const stored = [row.secret];
    if (row.previous_secret && row.previous_secret_expires_at && row.previous_secret_expires_at > attemptedAt) {
      stored.push(row.previous_secret);
    }
    // The current secret decides: if it does not open, nothing is sent and the log says why. A
    // previous one that does not open (sealed under an earlier key, the endpoint rotated since to
    // sign under this one) is left out: the current one signs alone.
    const signing: string[] = [];
    for (const [i, secret] of stored.entries()) {
      try {
        signing.push(secrets.open(secret, row.endpoint_id));
      } catch (error) {
        if (!(error instanceof SecretBoxError)) throw error;
        if (i > 0) continue;
        await record(tenantId, deliveryId, seq, { ok: false, statusCode: null, error: `Not sent: ${error.message}.` });
        return;
      }
    }
    const timestamp = Math.floor(attemptedAt.getTime() / 1000);
    const outcome = await observeWebhookAttempt({ endpointId: row.endpoint_id, deliveryId }, () =>
      attempt(row.url, signatureHeaders(signing, deliveryId, timestamp, row.payload), row.payload, ctx.signal),
    );
    await record(tenantId, deliveryId, seq, outcome);
  };

  /** Writes the attempt and its consequence (done, retry, given up, endpoint disabled) at once. */
  async function record(tenantId: string, deliveryId: string, seq: number, outcome: Outcome): Promise<void> {
    const at = now();
    const disabled = await db.transaction().execute(async (trx) => {
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
      const delivery = await trx
        .selectFrom('webhook_deliveries')
        .select(['endpoint_id', 'attempts', 'retry_until'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', deliveryId)
        .where('schedule_seq', '=', seq)
        .where('status', '=', 'pending')
        .forUpdate()
        .executeTakeFirst();
      if (!delivery) return undefined; // replayed or deleted while the attempt ran
      const attempts = Number(delivery.attempts) + 1;
      const attemptFields = {
        attempts,
        last_status_code: outcome.statusCode,
        last_error: outcome.error,
        last_attempt_at: at,
        updated_at: at,
      };

      if (outcome.ok) {
        await trx
          .updateTable('webhook_deliveries')
          .set({ ...attemptFields, status: 'succeeded', next_retry_at: null, delivered_at: at })
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
        return undefined;
      }

      // The failure streak starts at the first failure after the last success.
      const endpoint = await trx
        .updateTable('webhook_endpoints')
        .set((eb) => ({ failing_since: eb.fn.coalesce('failing_since', eb.val(at)) }))
        .where('tenant_id', '=', tenantId)
        .where('id', '=', delivery.endpoint_id)
        .returning(['failing_since', 'enabled'])
        .executeTakeFirstOrThrow();
      const failingSince = endpoint.failing_since ?? at;
      const disable = endpoint.enabled && at.getTime() - failingSince.getTime() >= policy.disableAfterMs;
      if (disable) {
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
          .where('id', '=', delivery.endpoint_id)
          .execute();
      }

      const delay = retryDelay(policy, attempts);
      const retry = !disable && at.getTime() + delay <= delivery.retry_until.getTime();
      await trx
        .updateTable('webhook_deliveries')
        .set((eb) => ({
          ...attemptFields,
          status: retry ? 'pending' : 'failed',
          next_retry_at: retry ? new Date(at.getTime() + delay) : null,
          schedule_seq: retry ? eb('schedule_seq', '+', 1) : eb.ref('schedule_seq'),
        }))
        .where('tenant_id', '=', tenantId)
        .where('id', '=', deliveryId)
        .execute();
      if (retry) {
        await jobs.enqueue(trx, {
          kind: WEBHOOK_DELIVERY_JOB,
          tenantId,
          payload: { delivery_id: deliveryId, seq: seq + 1 },
          runAt: new Date(Date.now() + delay),
          maxAttempts: WEBHOOK_JOB_MAX_ATTEMPTS,
        });
      }
      return disable ? delivery.endpoint_id : undefined;
    });
    if (disabled) {
      options.log?.warn({ tenant_id: tenantId, endpoint_id: disabled }, 'webhook endpoint disabled after failing');
    }
  }
}
