import type { FastifyReply, FastifyRequest } from 'fastify';
import { type IdempotencyDeps, NOT_STORED_STATUSES, sealContext } from './idempotency-keys.js';

/**
 * Stores the answer under the reserved key (or frees the key when there is nothing to replay),
 * while this request still holds it: a key taken over after this request's lease ran out is the
 * repeat's, left as it is.
 */
export async function store(
  { db, secrets, onError }: IdempotencyDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
) {
  const lease = request.idempotencyLease;
  if (lease === null || !request.auth) return payload;
  request.idempotencyLease = null;
  const { key, token } = lease;
  const where = { tenant: request.auth.tenantId, key };
  try {
    if (reply.statusCode >= 500 || NOT_STORED_STATUSES.includes(reply.statusCode) || typeof payload !== 'string') {
      // Not stored: a retry with the same key runs again.
      await db
        .deleteFrom('idempotency_keys')
        .where('tenant_id', '=', where.tenant)
        .where('key', '=', key)
        .where('lease_token', '=', token)
        .execute();
    } else {
      await db
        .updateTable('idempotency_keys')
        .set({
          status_code: reply.statusCode,
          content_type: String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8'),
          response_body: request.routeOptions.config.secretAnswer
            ? secrets.seal(payload, sealContext(where.tenant, key))
            : payload,
          lease_token: null,
        })
        .where('tenant_id', '=', where.tenant)
        .where('key', '=', key)
        .where('lease_token', '=', token)
        .execute();
    }
  } catch (error) {
    onError(error);
  }
  return payload;
}
