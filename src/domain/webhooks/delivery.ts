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
import type { Db } from '../../db/index.js';
import type { Job, JobContext, JobLog, JobQueue } from '../../jobs/queue.js';
import { createSecretBox, type SecretBox, SecretBoxError } from '../../lib/secret-box.js';
import { observeWebhookAttempt } from '../../observability/webhooks.js';
import { type AttemptOptions, attempt } from './delivery-attempt.js';
import { type RecordDeps, recordAttempt } from './delivery-record.js';
import { WEBHOOK_DELIVERY_JOB } from './events.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './retry-policy.js';
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

/** What a delivery job needs: the database and queue, the policy and its clock, the secrets. */
interface DeliveryDeps extends RecordDeps {
  secrets: SecretBox;
  attempt: AttemptOptions;
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
  const deps: DeliveryDeps = {
    db: options.db,
    jobs,
    policy: { ...DEFAULT_RETRY_POLICY, ...options.retry },
    now: options.now ?? (() => new Date()),
    log: options.log,
    secrets: options.secrets ?? createSecretBox(undefined),
    attempt: { allowPrivateTargets: options.allowPrivateTargets, timeoutMs: options.timeoutMs },
  };
  return (job: Job, ctx: JobContext): Promise<void> => deliver(deps, job, ctx);
}

/** One attempt of the delivery the job names, if it is still the one due, and its record. */
async function deliver(deps: DeliveryDeps, job: Job, ctx: JobContext): Promise<void> {
  const tenantId = job.tenantId;
  const deliveryId = String(job.payload.delivery_id ?? '');
  const seq = Number(job.payload.seq ?? 0);
  const row = await loadDelivery(deps.db, tenantId, deliveryId);
  // Deleted with its endpoint, finished, or superseded by a replay or a later retry.
  if (row?.status !== 'pending' || row.schedule_seq !== seq) return;

  if (!row.enabled) {
    await deps.db
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', next_retry_at: null, last_error: 'The endpoint is disabled.', updated_at: deps.now() })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', deliveryId)
      .where('schedule_seq', '=', seq)
      .where('status', '=', 'pending')
      .execute();
    return;
  }

  const attemptedAt = deps.now();
  let signing: string[];
  try {
    signing = signingSecrets(deps.secrets, row, attemptedAt);
  } catch (error) {
    if (!(error instanceof SecretBoxError)) throw error;
    await recordAttempt(deps, tenantId, deliveryId, seq, {
      ok: false,
      statusCode: null,
      error: `Not sent: ${error.message}.`,
    });
    return;
  }
  const timestamp = Math.floor(attemptedAt.getTime() / 1000);
  const outcome = await observeWebhookAttempt({ endpointId: row.endpoint_id, deliveryId }, () =>
    attempt(
      deps.attempt,
      row.url,
      signatureHeaders(signing, deliveryId, timestamp, row.payload),
      row.payload,
      ctx.signal,
    ),
  );
  await recordAttempt(deps, tenantId, deliveryId, seq, outcome);
}

/** The delivery with its event's payload and its endpoint's URL, state and secrets. */
function loadDelivery(db: Db, tenantId: string, deliveryId: string) {
  return db
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
}

/**
 * The secrets that sign at `at`, opened: the current one, and the previous one during its overlap.
 * The current secret decides: if it does not open, this throws its SecretBoxError, and nothing is
 * sent. A previous one that does not open (sealed under an earlier key, the endpoint rotated since
 * to sign under this one) is left out: the current one signs alone.
 */
function signingSecrets(
  secrets: SecretBox,
  endpoint: {
    endpoint_id: string;
    secret: string;
    previous_secret: string | null;
    previous_secret_expires_at: Date | null;
  },
  at: Date,
): string[] {
  const stored = [endpoint.secret];
  if (endpoint.previous_secret && endpoint.previous_secret_expires_at && endpoint.previous_secret_expires_at > at) {
    stored.push(endpoint.previous_secret);
  }
  const signing: string[] = [];
  for (const [i, secret] of stored.entries()) {
    try {
      signing.push(secrets.open(secret, endpoint.endpoint_id));
    } catch (error) {
      if (i > 0 && error instanceof SecretBoxError) continue;
      throw error;
    }
  }
  return signing;
}
