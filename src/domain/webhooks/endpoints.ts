// Webhook endpoints and their delivery log (DESIGN.md §7, webhooks).
// An endpoint is a URL subscribed to event types (or `*`). Its signing secret appears in the
// answers to create and rotate-secret only; a rotation keeps the old secret signing beside the
// new one for 24 hours. URLs must be http(s) and resolve to public addresses unless
// ALLOW_PRIVATE_TARGETS is set (checked here and again at each delivery, src/lib/ssrf.ts).
import type { Db, WebhookDeliveryStatus } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import { isUuid, newId } from '../../lib/ids.js';
import { createSecretBox, type SecretBox } from '../../lib/secret-box.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { getDelivery, listDeliveries, replayDelivery } from './deliveries.js';
import {
  ENDPOINT_COLUMNS,
  loadEndpoint,
  toEndpointRecord,
  type WebhookEndpointRecord,
  type WebhookEndpointWithSecret,
} from './endpoint-records.js';
import { checkUrl } from './endpoint-url.js';
import { ALL_EVENTS, isEventType } from './event-types.js';
import { DEFAULT_RETRY_POLICY } from './retry-policy.js';
import { sealStoredSecrets } from './secrets-at-rest.js';
import type { WebhookContext } from './service-context.js';
import { newWebhookSecret } from './signing.js';

export { DeliveryStatus, toDeliveryRecord, WebhookDeliveryRecord } from './delivery-records.js';
export { WebhookEndpointRecord, WebhookEndpointWithSecret } from './endpoint-records.js';

/** How long a rotated-out secret keeps signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;
export const MAX_URL_LENGTH = 2048;

export interface CreateEndpointInput {
  url: string;
  events: string[];
  description?: string | undefined;
}

export interface UpdateEndpointInput {
  url?: string | undefined;
  events?: string[] | undefined;
  enabled?: boolean | undefined;
  description?: string | null | undefined;
}

/** Known event types or `*`, without repeats, in the order given; an unknown one names its index. */
export function checkEvents(events: readonly string[], param = 'events'): string[] {
  events.forEach((event, i) => {
    if (event !== ALL_EVENTS && !isEventType(event)) {
      throw new ValidationError(
        `${param}[${i}]`,
        `${param}[${i}] is not a known event type ('${event}'); see the webhooks section of the OpenAPI document.`,
      );
    }
  });
  return [...new Set(events)];
}

export interface WebhookServiceDeps {
  db: Db;
  jobs: Pick<JobQueue, 'enqueue'>;
  allowPrivateTargets: boolean;
  /** Seals signing secrets at rest (SECRETS_KEY); without it they are stored as they are. */
  secrets?: SecretBox;
  retryWindowMs?: number;
  now?: () => Date;
}

export function createWebhookService({
  db,
  jobs,
  allowPrivateTargets,
  secrets = createSecretBox(undefined),
  retryWindowMs = DEFAULT_RETRY_POLICY.windowMs,
  now = () => new Date(),
}: WebhookServiceDeps) {
  const ctx: WebhookContext = { db, jobs, allowPrivateTargets, secrets, retryWindowMs, now };
  return {
    /** Creates an endpoint; the answer carries its signing secret, shown this once. */
    createEndpoint: (tenantId: string, input: CreateEndpointInput) => createEndpoint(ctx, tenantId, input),
    listEndpoints: (tenantId: string, page: Page) => listEndpoints(ctx, tenantId, page),
    getEndpoint: async (tenantId: string, id: string): Promise<WebhookEndpointRecord> =>
      toEndpointRecord(await loadEndpoint(db, tenantId, id), now),
    /** Changes the fields sent; enabling an endpoint (again) clears its failure streak. */
    updateEndpoint: (tenantId: string, id: string, input: UpdateEndpointInput) =>
      updateEndpoint(ctx, tenantId, id, input),
    /** Deletes the endpoint with its delivery log; its queued attempts find nothing and stop. */
    deleteEndpoint: (tenantId: string, id: string) => deleteEndpoint(ctx, tenantId, id),
    /** A new signing secret, shown this once; the current one keeps signing beside it for 24 hours. */
    rotateSecret: (tenantId: string, id: string) => rotateSecret(ctx, tenantId, id),
    /** Maintenance at start: seals the secrets stored before SECRETS_KEY, or under the previous key. */
    sealStoredSecrets: () => sealStoredSecrets(db, secrets),
    /** The endpoint's deliveries, newest first, optionally of one status. */
    listDeliveries: (
      tenantId: string,
      endpointId: string,
      page: Page & { status?: WebhookDeliveryStatus | undefined },
    ) => listDeliveries(ctx, tenantId, endpointId, page),
    getDelivery: (tenantId: string, id: string) => getDelivery(ctx, tenantId, id),
    /** Sends the delivery again now, whatever its status; a disabled endpoint answers 409 `conflict`. */
    replayDelivery: (tenantId: string, id: string) => replayDelivery(ctx, tenantId, id),
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;

/** Creates an endpoint; the answer carries its signing secret, shown this once. */
async function createEndpoint(
  { db, allowPrivateTargets, secrets, now }: WebhookContext,
  tenantId: string,
  input: CreateEndpointInput,
): Promise<WebhookEndpointWithSecret> {
  const events = checkEvents(input.events);
  const url = await checkUrl(input.url, allowPrivateTargets);
  const id = newId();
  const secret = newWebhookSecret();
  const at = now();
  const row = await db
    .insertInto('webhook_endpoints')
    .values({
      id,
      tenant_id: tenantId,
      url,
      description: input.description ?? null,
      events,
      secret: secrets.seal(secret, id),
      created_at: at,
      updated_at: at,
    })
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirstOrThrow();
  return { ...toEndpointRecord(row, now), secret };
}

async function listEndpoints({ db, now }: WebhookContext, tenantId: string, page: Page) {
  let query = db.selectFrom('webhook_endpoints').select(ENDPOINT_COLUMNS).where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  return toList(
    await query.execute(),
    page,
    (row) => toEndpointRecord(row, now),
    (row) => row.id,
  );
}

/**
 * Changes the fields sent. Enabling an endpoint (again) clears its `disabled_reason` and its
 * failure streak, so it gets five fresh days.
 */
async function updateEndpoint(
  { db, allowPrivateTargets, now }: WebhookContext,
  tenantId: string,
  id: string,
  input: UpdateEndpointInput,
): Promise<WebhookEndpointRecord> {
  await loadEndpoint(db, tenantId, id);
  const set: Record<string, unknown> = {};
  if (input.events !== undefined) set.events = checkEvents(input.events);
  if (input.url !== undefined) set.url = await checkUrl(input.url, allowPrivateTargets);
  if (input.description !== undefined) set.description = input.description;
  if (input.enabled === true) Object.assign(set, { enabled: true, disabled_reason: null, failing_since: null });
  if (input.enabled === false) Object.assign(set, { enabled: false, disabled_reason: 'Disabled through the API.' });
  if (Object.keys(set).length === 0) return toEndpointRecord(await loadEndpoint(db, tenantId, id), now);
  const row = await db
    .updateTable('webhook_endpoints')
    .set({ ...set, updated_at: now() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('webhook endpoint', id);
  return toEndpointRecord(row, now);
}

/** Deletes the endpoint with its delivery log; its queued attempts find nothing and stop. */
async function deleteEndpoint({ db }: WebhookContext, tenantId: string, id: string) {
  if (!isUuid(id)) throw new NotFoundError('webhook endpoint', id);
  const row = await db
    .deleteFrom('webhook_endpoints')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning('id')
    .executeTakeFirst();
  if (!row) throw new NotFoundError('webhook endpoint', id);
  return { id: row.id, object: 'deleted' as const, deleted: true };
}

/**
 * A new signing secret, shown this once. The current one keeps signing beside it for 24 hours
 * (each message then carries two signatures); a secret still in its overlap is dropped.
 */
async function rotateSecret(
  { db, secrets, now }: WebhookContext,
  tenantId: string,
  id: string,
): Promise<WebhookEndpointWithSecret> {
  if (!isUuid(id)) throw new NotFoundError('webhook endpoint', id);
  const secret = newWebhookSecret();
  const at = now();
  const row = await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({
      previous_secret: eb.ref('secret'),
      previous_secret_expires_at: new Date(at.getTime() + SECRET_OVERLAP_MS),
      secret: secrets.seal(secret, id),
      updated_at: at,
    }))
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('webhook endpoint', id);
  return { ...toEndpointRecord(row, now), secret };
}
