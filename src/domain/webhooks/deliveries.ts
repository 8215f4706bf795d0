// The delivery log of an endpoint: listing, reading, and replaying a delivery.
import type { WebhookDeliveryStatus } from '../../db/index.js';
import { isUuid } from '../../lib/ids.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { DELIVERY_COLUMNS, toDeliveryRecord, type WebhookDeliveryRecord } from './delivery-records.js';
import { loadEndpoint } from './endpoint-records.js';
import { WEBHOOK_DELIVERY_JOB, WEBHOOK_JOB_MAX_ATTEMPTS } from './events.js';
import type { WebhookContext } from './service-context.js';

/** The endpoint's deliveries, newest first, optionally of one status. */
export async function listDeliveries(
  { db }: WebhookContext,
  tenantId: string,
  endpointId: string,
  page: Page & { status?: WebhookDeliveryStatus | undefined },
) {
  await loadEndpoint(db, tenantId, endpointId);
  let query = db
    .selectFrom('webhook_deliveries')
    .select(DELIVERY_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('endpoint_id', '=', endpointId);
  if (page.status) query = query.where('status', '=', page.status);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toDeliveryRecord, (row) => row.id);
}

export async function getDelivery(
  { db }: WebhookContext,
  tenantId: string,
  id: string,
): Promise<WebhookDeliveryRecord> {
  if (!isUuid(id)) throw new NotFoundError('webhook delivery', id);
  const row = await db
    .selectFrom('webhook_deliveries')
    .select(DELIVERY_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('webhook delivery', id);
  return toDeliveryRecord(row);
}

/**
 * Sends the delivery again now, whatever its status: same event, same body, same `webhook-id`,
 * freshly signed. A retry still queued for it is superseded; if this attempt fails it is
 * retried for 24 hours from now. A disabled endpoint must be enabled first (409 `conflict`).
 */
export async function replayDelivery(
  { db, jobs, retryWindowMs, now }: WebhookContext,
  tenantId: string,
  id: string,
): Promise<WebhookDeliveryRecord> {
  if (!isUuid(id)) throw new NotFoundError('webhook delivery', id);
  return db.transaction().execute(async (trx) => {
    const delivery = await trx
      .selectFrom('webhook_deliveries')
      .select(['id', 'endpoint_id'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!delivery) throw new NotFoundError('webhook delivery', id);
    const endpoint = await loadEndpoint(trx, tenantId, delivery.endpoint_id);
    if (!endpoint.enabled) {
      throw new ConflictError('The endpoint of this delivery is disabled; enable it before replaying.');
    }
    const at = now();
    const row = await trx
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        status: 'pending',
        schedule_seq: eb('schedule_seq', '+', 1),
        next_retry_at: at,
        retry_until: new Date(at.getTime() + retryWindowMs),
        updated_at: at,
      }))
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .returning([...DELIVERY_COLUMNS, 'schedule_seq'])
      .executeTakeFirstOrThrow();
    await jobs.enqueue(trx, {
      kind: WEBHOOK_DELIVERY_JOB,
      tenantId,
      payload: { delivery_id: id, seq: row.schedule_seq },
      maxAttempts: WEBHOOK_JOB_MAX_ATTEMPTS,
    });
    return toDeliveryRecord(row);
  });
}
