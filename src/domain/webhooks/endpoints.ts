// Webhook endpoints and their delivery log (DESIGN.md §7, webhooks).
// An endpoint is a URL subscribed to event types (or `*`). Its signing secret appears in the
// answers to create and rotate-secret only; a rotation keeps the old secret signing beside the
// new one for 24 hours. URLs must be http(s) and resolve to public addresses unless
// ALLOW_PRIVATE_TARGETS is set (checked here and again at each delivery, src/lib/ssrf.ts).
import type { Db } from '../../db/client.js';
import type { WebhookDeliveryStatus } from '../../db/schema.js';
import type { JobQueue } from '../../jobs/queue.js';
import { isUuid, newId } from '../../lib/ids.js';
import { createSecretBox, SEALED, type SecretBox } from '../../lib/secret-box.js';
import { OutboundRequestError, resolveTarget } from '../../lib/ssrf.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { ALL_EVENTS, isEventType } from './event-types.js';
import { WEBHOOK_DELIVERY_JOB, WEBHOOK_JOB_MAX_ATTEMPTS } from './events.js';
import { DEFAULT_RETRY_POLICY } from './retry-policy.js';
import { newWebhookSecret } from './signing.js';

/** How long a rotated-out secret keeps signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;
export const MAX_URL_LENGTH = 2048;

export interface WebhookEndpointRecord {
  id: string;
  object: 'webhook_endpoint';
  url: string;
  description: string | null;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  /** Until when the previous secret still signs, after a rotation. */
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookDeliveryRecord {
  id: string;
  object: 'webhook_delivery';
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  next_retry_at: string | null;
  delivered_at: string | null;
  created_at: string;
  updated_at: string;
}

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

const ENDPOINT_COLUMNS = [
  'id',
  'url',
  'description',
  'events',
  'enabled',
  'disabled_reason',
  'previous_secret_expires_at',
  'created_at',
  'updated_at',
] as const;

type EndpointRow = {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

const DELIVERY_COLUMNS = [
  'id',
  'endpoint_id',
  'event_id',
  'event_type',
  'status',
  'attempts',
  'last_status_code',
  'last_error',
  'last_attempt_at',
  'next_retry_at',
  'delivered_at',
  'created_at',
  'updated_at',
] as const;

type DeliveryRow = {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: Date | null;
  next_retry_at: Date | null;
  delivered_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

export const toDeliveryRecord = (row: DeliveryRow): WebhookDeliveryRecord => ({
  id: row.id,
  object: 'webhook_delivery',
  endpoint_id: row.endpoint_id,
  event_id: row.event_id,
  event_type: row.event_type,
  status: row.status,
  attempts: Number(row.attempts),
  last_status_code: row.last_status_code,
  last_error: row.last_error,
  last_attempt_at: iso(row.last_attempt_at),
  next_retry_at: iso(row.next_retry_at),
  delivered_at: iso(row.delivered_at),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

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
  const toEndpointRecord = (row: EndpointRow): WebhookEndpointRecord => {
    const overlap = row.previous_secret_expires_at;
    return {
      id: row.id,
      object: 'webhook_endpoint',
      url: row.url,
      description: row.description,
      events: row.events,
      enabled: row.enabled,
      disabled_reason: row.disabled_reason,
      previous_secret_expires_at: overlap && overlap > now() ? iso(overlap) : null,
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    };
  };

  /** An absolute http(s) URL without credentials whose host resolves to allowed addresses. */
  async function checkUrl(raw: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ValidationError('url', 'url must be an absolute http or https URL.');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ValidationError('url', `url must use http or https, not '${url.protocol.replace(/:$/, '')}'.`);
    }
    if (url.username || url.password) throw new ValidationError('url', 'url must not carry credentials.');
    if (url.hash) throw new ValidationError('url', 'url must not carry a fragment (#…).');
    try {
      await resolveTarget(url, { allowPrivate: allowPrivateTargets });
    } catch (error) {
      if (error instanceof OutboundRequestError) {
        throw new ValidationError(
          'url',
          error.reason === 'blocked'
            ? `url is refused: ${error.message} Webhooks go to public addresses only.`
            : `url is refused: ${error.message}`,
        );
      }
      throw error;
    }
    return url.href;
  }

  async function loadEndpoint(executor: Db, tenantId: string, id: string): Promise<EndpointRow> {
    if (!isUuid(id)) throw new NotFoundError('webhook endpoint', id);
    const row = await executor
      .selectFrom('webhook_endpoints')
      .select(ENDPOINT_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw new NotFoundError('webhook endpoint', id);
    return row;
  }

  return {
    /** Creates an endpoint; the answer carries its signing secret, shown this once. */
    async createEndpoint(
      tenantId: string,
      input: CreateEndpointInput,
    ): Promise<WebhookEndpointRecord & { secret: string }> {
      const events = checkEvents(input.events);
      const url = await checkUrl(input.url);
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
      return { ...toEndpointRecord(row), secret };
    },

    async listEndpoints(tenantId: string, page: Page) {
      let query = db.selectFrom('webhook_endpoints').select(ENDPOINT_COLUMNS).where('tenant_id', '=', tenantId);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toEndpointRecord, (row) => row.id);
    },

    async getEndpoint(tenantId: string, id: string): Promise<WebhookEndpointRecord> {
      return toEndpointRecord(await loadEndpoint(db, tenantId, id));
    },

    /**
     * Changes the fields sent. Enabling an endpoint (again) clears its `disabled_reason` and its
     * failure streak, so it gets five fresh days.
     */
    async updateEndpoint(tenantId: string, id: string, input: UpdateEndpointInput): Promise<WebhookEndpointRecord> {
      await loadEndpoint(db, tenantId, id);
      const set: Record<string, unknown> = {};
      if (input.events !== undefined) set.events = checkEvents(input.events);
      if (input.url !== undefined) set.url = await checkUrl(input.url);
      if (input.description !== undefined) set.description = input.description;
      if (input.enabled === true) Object.assign(set, { enabled: true, disabled_reason: null, failing_since: null });
      if (input.enabled === false) Object.assign(set, { enabled: false, disabled_reason: 'Disabled through the API.' });
      if (Object.keys(set).length === 0) return toEndpointRecord(await loadEndpoint(db, tenantId, id));
      const row = await db
        .updateTable('webhook_endpoints')
        .set({ ...set, updated_at: now() })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning(ENDPOINT_COLUMNS)
        .executeTakeFirst();
      if (!row) throw new NotFoundError('webhook endpoint', id);
      return toEndpointRecord(row);
    },

    /** Deletes the endpoint with its delivery log; its queued attempts find nothing and stop. */
    async deleteEndpoint(tenantId: string, id: string) {
      if (!isUuid(id)) throw new NotFoundError('webhook endpoint', id);
      const row = await db
        .deleteFrom('webhook_endpoints')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('webhook endpoint', id);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },

    /**
     * A new signing secret, shown this once. The current one keeps signing beside it for 24 hours
     * (each message then carries two signatures); a secret still in its overlap is dropped.
     */
    async rotateSecret(tenantId: string, id: string): Promise<WebhookEndpointRecord & { secret: string }> {
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
      return { ...toEndpointRecord(row), secret };
    },

    /**
     * Maintenance at start, across tenants: with SECRETS_KEY set, seals the secrets stored before
     * it was, and with SECRETS_KEY_PREVIOUS set too, seals again under SECRETS_KEY those sealed
     * under the previous key (each row only if unchanged meanwhile, so instances starting together
     * agree). Returns how many endpoints it changed.
     */
    async sealStoredSecrets(): Promise<number> {
      if (!secrets.sealing) return 0;
      let query = db.selectFrom('webhook_endpoints').select(['id', 'secret', 'previous_secret']);
      // Which key sealed a value only opening it tells: with a previous key, every row is looked at.
      if (!secrets.rotating) {
        query = query.where((eb) =>
          eb.or([
            eb('secret', 'not like', `${SEALED}%`),
            eb.and([eb('previous_secret', 'is not', null), eb('previous_secret', 'not like', `${SEALED}%`)]),
          ]),
        );
      }
      let changed = 0;
      for (const row of await query.execute()) {
        const secret = secrets.reseal(row.secret, row.id);
        const previous = row.previous_secret === null ? undefined : secrets.reseal(row.previous_secret, row.id);
        if (secret === undefined && previous === undefined) continue;
        const result = await db
          .updateTable('webhook_endpoints')
          .set({ secret: secret ?? row.secret, previous_secret: previous ?? row.previous_secret })
          .where('id', '=', row.id)
          .where('secret', '=', row.secret)
          .where('previous_secret', 'is not distinct from', row.previous_secret)
          .executeTakeFirst();
        changed += Number(result.numUpdatedRows);
      }
      return changed;
    },

    /** The endpoint's deliveries, newest first, optionally of one status. */
    async listDeliveries(
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
    },

    async getDelivery(tenantId: string, id: string): Promise<WebhookDeliveryRecord> {
      if (!isUuid(id)) throw new NotFoundError('webhook delivery', id);
      const row = await db
        .selectFrom('webhook_deliveries')
        .select(DELIVERY_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .executeTakeFirst();
      if (!row) throw new NotFoundError('webhook delivery', id);
      return toDeliveryRecord(row);
    },

    /**
     * Sends the delivery again now, whatever its status: same event, same body, same `webhook-id`,
     * freshly signed. A retry still queued for it is superseded; if this attempt fails it is
     * retried for 24 hours from now. A disabled endpoint must be enabled first (409 `conflict`).
     */
    async replayDelivery(tenantId: string, id: string): Promise<WebhookDeliveryRecord> {
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
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
