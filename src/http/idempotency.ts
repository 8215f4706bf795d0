// Idempotency-Key on POST (DESIGN.md §5): the first answer (any status below 500) is stored for
// 24 h per tenant and replayed for a repeat by the same API key with the same method, path and body
// (the same JSON, whatever the order of its fields); the same key with another request, or sent by
// another API key, answers 409 `conflict`, as does a repeat while the first is still running.
// A request answered with a Server-Sent Events stream keeps its key, but a stream cannot be
// replayed: once it ends, a repeat answers 409 `conflict` rather than running again.
// While a request runs, its key is leased: the lease is renewed as long as it runs, so a repeat
// waits (409) for a long one, but once its server has stopped mid-request (a crash) the lease runs
// out and a repeat runs again, as after a 5xx. The reservation names its request (a lease token):
// a request that lost its lease (its renewals failed while the database was unreachable, and a
// repeat took the key over) neither renews, stores its answer on, nor frees the repeat's key.
// An answer holding a secret shown once (a webhook signing secret) is kept sealed, as the secret
// itself is (src/lib/secret-box.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Db } from '../db/index.js';
import type { SecretBox } from '../lib/secret-box.js';
import { hookList } from './hooks.js';
import { IDEMPOTENCY_LEASE_SECONDS, IDEMPOTENCY_TTL_HOURS, type IdempotencyDeps } from './idempotency-keys.js';
import { reserve } from './idempotency-reserve.js';
import { store } from './idempotency-store.js';

export { IDEMPOTENCY_LEASE_SECONDS, IDEMPOTENCY_TTL_HOURS, NOT_STORED_STATUSES } from './idempotency-keys.js';

export function registerIdempotency(
  app: FastifyInstance,
  db: Db,
  secrets: SecretBox,
  onError: (error: unknown) => void,
  { leaseSeconds = IDEMPOTENCY_LEASE_SECONDS }: { leaseSeconds?: number } = {},
): void {
  app.decorateRequest('idempotencyLease', null);
  const deps: IdempotencyDeps = { db, secrets, onError, leaseSeconds };
  const reserveKey = (request: FastifyRequest, reply: FastifyReply) => reserve(deps, request, reply);
  const storeAnswer = (request: FastifyRequest, reply: FastifyReply, payload: unknown) =>
    store(deps, request, reply, payload);

  // Only POST routes carry the hooks: a read pays nothing for idempotency.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('POST')) return;
    route.preHandler = [...hookList(route.preHandler), reserveKey];
    route.onSend = [...hookList(route.onSend), storeAnswer];
  });
}

/** Deletes records past the retention window. */
export async function sweepIdempotencyKeys(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where(sql<boolean>`created_at < now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
