// An Idempotency-Key's record: how long it is kept, how long a running request holds it, what a
// repeat must match to be given the stored answer, and what a sealed answer is bound to.
import type { FastifyRequest } from 'fastify';
import type { Db } from '../db/index.js';
import { sha256Hex } from '../lib/ids.js';
import type { SecretBox } from '../lib/secret-box.js';

export const IDEMPOTENCY_TTL_HOURS = 24;
/** How long a running request's key stays reserved without being renewed (renewed every third of it). */
export const IDEMPOTENCY_LEASE_SECONDS = 60;
export const HEADER = 'idempotency-key';
/** The content type recorded for a key whose answer was a stream: there is no body to replay. */
export const STREAMED = 'text/event-stream';
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

/** What reserving a key and storing its answer need. */
export interface IdempotencyDeps {
  db: Db;
  secrets: SecretBox;
  onError: (error: unknown) => void;
  leaseSeconds: number;
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
export function requestHash(request: FastifyRequest, keyId: string): string {
  // A route that parses its own body (MCP) holds it as bytes: hashed as its text, not as an
  // object of one key per byte.
  const body = Buffer.isBuffer(request.body) ? request.body.toString('utf8') : (request.body ?? null);
  return sha256Hex(`${keyId} ${request.method} ${request.url}\n${canonicalJson(body)}`);
}

/** What a stored answer is bound to when sealed: a sealed answer does not open under another key. */
export const sealContext = (tenantId: string, key: string) => `idempotency:${tenantId}:${key}`;
