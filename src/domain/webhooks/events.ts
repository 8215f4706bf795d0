// The one function every area calls when something happens that integrators may subscribe to:
// `emitEvent(executor, tenantId, type, data)`. It records the event and adds one
// delivery, with its job on the durable queue, per enabled endpoint of the tenant subscribed to
// the type. Pass the caller's transaction as `executor`: the event then exists exactly when the
// change it reports commits, and a rollback takes it back with everything else. Called outside a
// transaction, it makes its own: the event, its deliveries and their jobs are written together.
// The endpoints it delivers to are locked (FOR KEY SHARE) until then: an endpoint being deleted
// meanwhile is either waited for and left out, or deleted after the deliveries, with them. Read
// unlocked, one deleted between the read and the deliveries' insert failed the insert on its
// foreign key: the change the event reports was refused (422) with it, or its event lost.
//
// An event no endpoint subscribes to is not stored (nothing would read it).
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { EVENT_TYPES, type EventData, type EventType } from './event-types.js';
import { DEFAULT_RETRY_POLICY } from './retry-policy.js';

export const WEBHOOK_DELIVERY_JOB = 'webhook.deliver';
/** A job is retried by the queue only for our own failures (database); the endpoint's are retried by us. */
export const WEBHOOK_JOB_MAX_ATTEMPTS = 5;

export interface EmittedEvent {
  id: string | null;
  type: EventType;
  /** Deliveries added: one per subscribed, enabled endpoint. */
  deliveries: number;
}

export type EmitEvent = <T extends EventType>(
  executor: Db,
  tenantId: string,
  type: T,
  data: EventData<T>,
) => Promise<EmittedEvent>;

export interface EventEmitterDeps {
  jobs: Pick<JobQueue, 'enqueue'>;
  /** How long a delivery is retried (DEFAULT_RETRY_POLICY.windowMs). */
  retryWindowMs?: number;
  now?: () => Date;
}

/**
 * The tenant's enabled endpoints subscribed to `type`: those `emitEvent` delivers to. A writer may
 * test `exists` on it to learn, in its own statement, whether its change has an event to emit.
 */
export function subscribedEndpoints(executor: Db, tenantId: string, type: EventType) {
  return executor
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('enabled', '=', true)
    .where(sql<boolean>`(${type} = any(events) or '*' = any(events))`);
}

export function createEventEmitter({ jobs, retryWindowMs, now = () => new Date() }: EventEmitterDeps): EmitEvent {
  const windowMs = retryWindowMs ?? DEFAULT_RETRY_POLICY.windowMs;
  const emit: EmitEvent = async (executor, tenantId, type, data) => {
    // A typed call cannot name an unknown type; this guards untyped callers.
    if (!Object.hasOwn(EVENT_TYPES, type)) throw new Error(`unknown event type '${type}'`);
    if (!executor.isTransaction) {
      return executor.transaction().execute((trx) => emit(trx, tenantId, type, data));
    }
    const endpoints = await subscribedEndpoints(executor, tenantId, type).orderBy('id').forKeyShare().execute();
    if (endpoints.length === 0) return { id: null, type, deliveries: 0 };

    const id = newId();
    const createdAt = now();
    // Serialised once: every attempt to every endpoint sends (and signs) these exact bytes.
    const payload = JSON.stringify({ id, type, created_at: createdAt.toISOString(), data });
    await executor
      .insertInto('webhook_events')
      .values({ id, tenant_id: tenantId, type, payload, created_at: createdAt })
      .execute();
    const deliveries = endpoints.map((endpoint) => ({
      id: newId(),
      tenant_id: tenantId,
      endpoint_id: endpoint.id,
      event_id: id,
      event_type: type,
      next_retry_at: createdAt,
      retry_until: new Date(createdAt.getTime() + windowMs),
      created_at: createdAt,
      updated_at: createdAt,
    }));
    await executor.insertInto('webhook_deliveries').values(deliveries).execute();
    for (const delivery of deliveries) {
      await jobs.enqueue(executor, {
        kind: WEBHOOK_DELIVERY_JOB,
        tenantId,
        payload: { delivery_id: delivery.id, seq: 0 },
        maxAttempts: WEBHOOK_JOB_MAX_ATTEMPTS,
      });
    }
    return { id, type, deliveries: deliveries.length };
  };
  return emit;
}
