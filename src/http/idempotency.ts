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
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Db } from '../db/client.js';
import { ConflictError, ValidationError } from '../domain/errors.js';
import { sha256Hex } from '../lib/ids.js';
import { type SecretBox, SecretBoxError } from '../lib/secret-box.js';
import { hookList } from './hooks.js';
import { asksForEventStream } from './negotiation.js';

export const IDEMPOTENCY_TTL_HOURS = 24;
/** How long a running request's key stays reserved without being renewed (renewed every third of it). */
export const IDEMPOTENCY_LEASE_SECONDS = 60;
const HEADER = 'idempotency-key';
/** The content type recorded for a key whose answer was a stream: there is no body to replay. */
const STREAMED = 'text/event-stream';
/**
 * Refusals before the operation runs, never stored (as 5xx are not): the key stays free for the
 * retry. Most come before the key is reserved; the MCP endpoint's refusals of a browser Origin
 * (403) and for want of a slot (429) come after it, in its handler.
 */
export const NOT_STORED_STATUSES: readonly number[] = [401, 403, 413, 429];

declare module 'fastify' {
  interface FastifyRequest {
    /** The Idempotency-Key this request holds while it runs, and its lease's token. */
    idempotencyLease: { key: string; token: string } | null;
  }
  interface FastifyContextConfig {
    /** The route's answers may show a secret once: a copy kept to replay one is sealed. */
    secretAnswer?: boolean;
  }
}

/**
 * JSON with every object's keys in sorted order: one request, whatever order its client wrote the
 * fields in (a Go map's order changes between a request and its retry). Recursive, which the body
 * allows: it nests at most MAX_JSON_DEPTH levels.
 */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const object = value as Record<string, unknown>;
    const fields = Object.keys(object)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * What a stored answer is matched on: the API key that made the request (a stored answer belongs to
 * its key, so another key of the tenant, with other scopes, can never be given it), the method and
 * URL, and the body.
 */
function requestHash(request: FastifyRequest, keyId: string): string {
  // A route that parses its own body (MCP) holds it as bytes: hashed as its text, not as an
  // object of one key per byte.
  const body = Buffer.isBuffer(request.body) ? request.body.toString('utf8') : (request.body ?? null);
  return sha256Hex(`${keyId} ${request.method} ${request.url}\n${canonicalJson(body)}`);
}

/** What a stored answer is bound to when sealed: a sealed answer does not open under another key. */
const sealContext = (tenantId: string, key: string) => `idempotency:${tenantId}:${key}`;

export function registerIdempotency(
  app: FastifyInstance,
  db: Db,
  secrets: SecretBox,
  onError: (error: unknown) => void,
  { leaseSeconds = IDEMPOTENCY_LEASE_SECONDS }: { leaseSeconds?: number } = {},
): void {
  app.decorateRequest('idempotencyLease', null);

  /** Reserves the key, or answers from what is stored. Runs after authentication and validation. */
  const reserve = async (request: FastifyRequest, reply: FastifyReply) => {
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
               and idempotency_keys.created_at < now() - make_interval(secs => ${leaseSeconds}))
      returning key`.execute(db);
    if (reserved.rows.length > 0) {
      const lease = { key: header, token };
      request.idempotencyLease = lease;
      // Renewed until the answer is stored (or the stream recorded), which releases the key: not
      // until the connection closes, since a client that hangs up leaves its request running.
      const renewal = setInterval(
        () => {
          if (request.idempotencyLease !== lease) return clearInterval(renewal);
          db.updateTable('idempotency_keys')
            .set({ created_at: sql`now()` })
            .where('tenant_id', '=', tenantId)
            .where('key', '=', header)
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
            .where('key', '=', header)
            .where('lease_token', '=', token)
            .execute()
            .catch(onError);
        });
      }
      return;
    }
    const stored = await db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'status_code', 'content_type', 'response_body'])
      .where('tenant_id', '=', tenantId)
      .where('key', '=', header)
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
        body = secrets.open(body, sealContext(tenantId, header));
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
  };

  /**
   * Stores the answer under the reserved key (or frees the key when there is nothing to replay),
   * while this request still holds it: a key taken over after this request's lease ran out is the
   * repeat's, left as it is.
   */
  const store = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
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
  };

  // Only POST routes carry the hooks: a read pays nothing for idempotency.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('POST')) return;
    route.preHandler = [...hookList(route.preHandler), reserve];
    route.onSend = [...hookList(route.onSend), store];
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
