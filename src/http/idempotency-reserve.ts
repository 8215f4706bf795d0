// Reserving a key for the request, under a lease renewed while it runs, or answering a repeat
// from what is stored.
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import { ConflictError, ValidationError } from '../domain/errors.js';
import { SecretBoxError } from '../lib/secret-box.js';
import {
  HEADER,
  IDEMPOTENCY_TTL_HOURS,
  type IdempotencyDeps,
  requestHash,
  STREAMED,
  sealContext,
} from './idempotency-keys.js';
import { asksForEventStream } from './negotiation.js';

/** Reserves the key, or answers from what is stored. Runs after authentication and validation. */
export async function reserve(deps: IdempotencyDeps, request: FastifyRequest, reply: FastifyReply) {
  const header = request.headers[HEADER];
  if (request.method !== 'POST' || header === undefined || !request.auth) return;
  if (typeof header !== 'string' || header.length === 0 || header.length > 255) {
    throw new ValidationError('Idempotency-Key', 'The Idempotency-Key header must be 1 to 255 characters.');
  }
  const tenantId = request.auth.tenantId;
  const hash = requestHash(request, request.auth.keyId);
  // Reserve the key, taking over a record older than the retention window, or the reservation of
  // a request whose lease ran out (its server stopped while it ran). A running request's
  // `created_at` is its lease's start, renewed below; `lease_token` names this request.
  const token = randomUUID();
  const reserved = await sql<{ key: string }>`
    insert into idempotency_keys (tenant_id, key, request_hash, lease_token, created_at)
    values (${tenantId}, ${header}, ${hash}, ${token}, now())
    on conflict (tenant_id, key) do update
      set request_hash = excluded.request_hash, status_code = null, content_type = null,
          response_body = null, lease_token = excluded.lease_token, created_at = now()
      where idempotency_keys.created_at < now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})
         or (idempotency_keys.status_code is null
             and idempotency_keys.created_at < now() - make_interval(secs => ${deps.leaseSeconds}))
    returning key`.execute(deps.db);
  if (reserved.rows.length > 0) {
    holdLease(deps, request, reply, tenantId, { key: header, token });
    return;
  }
  return replayStored(deps, reply, tenantId, header, hash);
}

/**
 * Gives the request its lease and renews it until the answer is stored (or the stream recorded),
 * which releases the key: not until the connection closes, since a client that hangs up leaves
 * its request running.
 */
function holdLease(
  { db, onError, leaseSeconds }: IdempotencyDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  tenantId: string,
  lease: { key: string; token: string },
): void {
  const { key, token } = lease;
  request.idempotencyLease = lease;
  const renewal = setInterval(
    () => {
      if (request.idempotencyLease !== lease) return clearInterval(renewal);
      db.updateTable('idempotency_keys')
        .set({ created_at: sql`now()` })
        .where('tenant_id', '=', tenantId)
        .where('key', '=', key)
        .where('lease_token', '=', token)
        .executeTakeFirst()
        .then((renewed) => {
          if (renewed.numUpdatedRows === 0n) clearInterval(renewal);
        }, onError);
    },
    (leaseSeconds * 1000) / 3,
  );
  renewal.unref();
  // A stream's answer bypasses `store`: once it ends, the key is recorded as used by a stream
  // (an answer sent as JSON instead, such as an error, has been stored and released it).
  if (asksForEventStream(request.headers.accept)) {
    reply.raw.once('close', () => {
      if (request.idempotencyLease !== lease) return;
      request.idempotencyLease = null;
      db.updateTable('idempotency_keys')
        .set({ status_code: reply.raw.statusCode, content_type: STREAMED, response_body: null, lease_token: null })
        .where('tenant_id', '=', tenantId)
        .where('key', '=', key)
        .where('lease_token', '=', token)
        .execute()
        .catch(onError);
    });
  }
}

/**
 * A repeat of a request whose key is taken: its stored answer, replayed; 409 for another request,
 * one still running, or one answered with a stream.
 */
async function replayStored(
  { db, secrets }: IdempotencyDeps,
  reply: FastifyReply,
  tenantId: string,
  key: string,
  hash: string,
) {
  const stored = await db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status_code', 'content_type', 'response_body'])
    .where('tenant_id', '=', tenantId)
    .where('key', '=', key)
    .executeTakeFirst();
  if (!stored || stored.request_hash !== hash) {
    throw new ConflictError(
      'This Idempotency-Key was already used with a different request, or by another API key; use a new key.',
      'Idempotency-Key',
    );
  }
  if (stored.status_code === null) {
    throw new ConflictError('A request with this Idempotency-Key is still being processed.', 'Idempotency-Key');
  }
  if (stored.content_type === STREAMED) {
    throw new ConflictError(
      'This Idempotency-Key was used by a request answered with a stream, which cannot be replayed; use a new key.',
      'Idempotency-Key',
    );
  }
  let body = stored.response_body;
  if (body !== null && secrets.isSealed(body)) {
    try {
      body = secrets.open(body, sealContext(tenantId, key));
    } catch (error) {
      if (!(error instanceof SecretBoxError)) throw error;
      throw new ConflictError(
        'The answer stored under this Idempotency-Key can no longer be opened (SECRETS_KEY changed); use a new key.',
        'Idempotency-Key',
      );
    }
  }
  reply.header('idempotent-replayed', 'true');
  reply.code(stored.status_code).type(stored.content_type ?? 'application/json; charset=utf-8');
  return reply.send(body);
}
