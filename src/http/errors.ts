// The one place errors become HTTP answers (spec: Errors; DESIGN.md §4). Every error body is
// `{error: {type, code, message, param?, doc_url, event_id?}}`; the status and type come from the
// code's entry in the catalogue, never from message text.
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorObject } from 'ajv';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  isDatabaseUnreachable,
  isForeignKeyViolation,
  isInputRejected,
  isQueryCanceled,
  isUniqueViolation,
} from '../db/errors.js';
import type { DatabaseOutages } from '../db/outage.js';
import { DomainError, type ErrorCode, NotFoundError } from '../domain/errors.js';
import { newId } from '../lib/ids.js';
import { recordRefusal } from '../observability/metrics.js';
import type { Operation } from '../operations/registry.js';
import { authChallenge } from './auth.js';

export type ErrorType =
  | 'authentication_error'
  | 'permission_error'
  | 'invalid_request_error'
  | 'rate_limit_error'
  | 'api_error';

export const ERROR_CATALOGUE: Record<ErrorCode, { status: number; type: ErrorType; condition: string }> = {
  not_authenticated: { status: 401, type: 'authentication_error', condition: 'No valid API key was supplied.' },
  invalid_api_key: {
    status: 401,
    type: 'authentication_error',
    condition: 'The key is invalid, expired, locked or revoked, or belongs to another tenant than the host names.',
  },
  insufficient_scope: {
    status: 403,
    type: 'permission_error',
    condition: 'The key lacks the scope the operation needs. A write scope includes read access.',
  },
  not_found: {
    status: 404,
    type: 'invalid_request_error',
    condition: 'The resource does not exist, was deleted, or belongs to another tenant; path ids are UUIDs.',
  },
  bad_request: {
    status: 400,
    type: 'invalid_request_error',
    condition: 'Malformed request: invalid JSON, a body that is not an object, or an unsupported content type.',
  },
  validation_error: {
    status: 422,
    type: 'invalid_request_error',
    condition: 'A parameter failed validation (type, bounds, format, unknown field); `param` names it.',
  },
  missing_required_parameter: {
    status: 422,
    type: 'invalid_request_error',
    condition: 'A required body field is missing; `param` names it.',
  },
  invalid_parameters: {
    status: 422,
    type: 'invalid_request_error',
    condition: 'A value is well-formed but invalid here, e.g. a UUID naming nothing in this tenant.',
  },
  conflict: {
    status: 409,
    type: 'invalid_request_error',
    condition:
      'The name is taken, the resource is in a state that forbids the change, or an Idempotency-Key was reused.',
  },
  too_many_items: {
    status: 422,
    type: 'invalid_request_error',
    condition: 'A bulk operation sent more than 100 items (422 here; 413 is kept for body size).',
  },
  empty_items: {
    status: 422,
    type: 'invalid_request_error',
    condition: 'A bulk operation sent an empty items array; at least one is needed.',
  },
  ambiguous_addressing: {
    status: 422,
    type: 'invalid_request_error',
    condition: 'A bulk operation addressed resources two ways (document_ids together with source_id and page_ids).',
  },
  creation_failed: {
    status: 500,
    type: 'api_error',
    condition:
      'A create (a POST that makes a resource, an app commit among them; over REST or MCP) failed on the server, not because of the request: an unexpected database or server error, or a statement that ran too long. It was logged under `event_id`. Retry the same request (a 500 is not kept under its Idempotency-Key); if it keeps failing, report the `event_id`.',
  },
  update_failed: {
    status: 500,
    type: 'api_error',
    condition:
      'An update (PUT, PATCH, or a POST that changes a resource: permissions added, a webhook secret rotated, a knowledge update request reviewed, resolved or applied; over REST or MCP) failed on the server, not because of the request: an unexpected database or server error, or a statement that ran too long. It was logged under `event_id`. Retry the same request; if it keeps failing, report the `event_id`.',
  },
  deletion_failed: {
    status: 500,
    type: 'api_error',
    condition:
      'A delete (DELETE, or a POST that deletes, clears or purges, over REST or MCP) failed on the server, not because of the request: an unexpected database or server error, or a statement that ran too long. It was logged under `event_id`. Retry the same request; if it keeps failing, report the `event_id`.',
  },
  export_failed: {
    status: 500,
    type: 'api_error',
    condition: 'Internal failure on export; use a smaller date range or retry later.',
  },
  request_too_large: { status: 413, type: 'invalid_request_error', condition: 'The body exceeds the maximum size.' },
  rate_limit_exceeded: {
    status: 429,
    type: 'rate_limit_error',
    condition: 'Too many requests from this client IP; wait for the `Retry-After` seconds.',
  },
  concurrency_limit_exceeded: {
    status: 429,
    type: 'rate_limit_error',
    condition: 'The MCP endpoint has too many simultaneous requests; wait for the `Retry-After` seconds.',
  },
  turn_limit_exceeded: {
    status: 429,
    type: 'rate_limit_error',
    condition:
      'The workspace has as many streamed message turns, or turns waiting for client function results, as one server runs for it (TURN_MAX_STREAMS_PER_TENANT, TURN_MAX_WAITING_PER_TENANT); nothing was done. Retry after the `Retry-After` seconds.',
  },
  forbidden_origin: {
    status: 403,
    type: 'permission_error',
    condition:
      'A browser Origin that may not use the MCP endpoint (DNS-rebinding protection; see MCP_ALLOWED_ORIGINS).',
  },
  service_unavailable: {
    status: 503,
    type: 'api_error',
    condition:
      'The database cannot be reached, this server is shutting down, or too many full-text searches and reports are running (SEARCH_MAX_CONCURRENT); nothing was done. Retry after the `Retry-After` seconds.',
  },
  internal_error: {
    status: 500,
    type: 'api_error',
    condition: 'An unexpected error; it was logged under `event_id`.',
  },
};

export interface ErrorBody {
  error: {
    type: ErrorType;
    code: ErrorCode;
    message: string;
    param?: string;
    doc_url: string;
    event_id?: string;
  };
}

/** Public origin for `doc_url`: PUBLIC_URL, else the scheme and host the request came in on. */
export function publicOrigin(request: FastifyRequest, configured: string | undefined): string {
  if (configured) return configured;
  const host = /^[A-Za-z0-9.:[\]-]+$/.test(request.host) ? request.host : 'localhost';
  return `${request.protocol}://${host}`;
}

export function errorBody(
  origin: string,
  code: ErrorCode,
  message: string,
  param?: string,
  eventId?: string,
): { status: number; body: ErrorBody } {
  const entry = ERROR_CATALOGUE[code];
  return {
    status: entry.status,
    body: {
      error: {
        type: entry.type,
        code,
        message,
        ...(param !== undefined ? { param } : {}),
        doc_url: `${origin}/docs/errors#${code}`,
        ...(eventId !== undefined ? { event_id: eventId } : {}),
      },
    },
  };
}

/** `/files/3/path` → `files[3].path`. */
export function toParamPath(pointer: string): string {
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(segment) ? `[${segment}]` : out === '' ? segment : `.${segment}`;
  }
  return out;
}

const joinPath = (base: string, key: string) => (base === '' ? key : `${base}.${key}`);

/** Maps the first schema violation of a request part to the spec's error. */
export function fromValidation(part: string, error: ErrorObject): { code: ErrorCode; message: string; param?: string } {
  const at = toParamPath(error.instancePath);
  if (part === 'params') {
    return { code: 'not_found', message: 'No such resource: the path does not name one.', param: at || undefined };
  }
  if (part === 'body' && at === '' && error.keyword === 'type') {
    return { code: 'bad_request', message: 'The request body must be a JSON object.' };
  }
  if (error.keyword === 'required') {
    const param = joinPath(at, String(error.params.missingProperty));
    if (part === 'body')
      return { code: 'missing_required_parameter', message: `Missing required parameter: ${param}.`, param };
    return { code: 'validation_error', message: `Missing required parameter: ${param}.`, param };
  }
  if (error.keyword === 'additionalProperties') {
    const param = joinPath(at, String(error.params.additionalProperty));
    return { code: 'validation_error', message: `Unknown parameter: ${param}.`, param };
  }
  const param = at || undefined;
  let detail = error.message ?? 'is invalid';
  if (error.keyword === 'enum' && Array.isArray(error.params.allowedValues)) {
    detail = `must be one of: ${error.params.allowedValues.join(', ')}`;
  }
  return { code: 'validation_error', message: `${param ?? part} ${detail}.`, param };
}

/** Fastify's own errors (content type, JSON, body size) in the spec's terms. */
function fromFastify(error: FastifyError): { code: ErrorCode; message: string } | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'request_too_large', message: 'The request body exceeds the maximum size.' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: 'bad_request', message: 'Unsupported content type: request bodies must be application/json.' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'bad_request', message: 'The Content-Length header does not match the body.' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { code: 'bad_request', message: 'The request body is not valid JSON.' };
    default:
      if (error.statusCode === 400 && error instanceof SyntaxError) {
        return { code: 'bad_request', message: 'The request body is not valid JSON.' };
      }
      return undefined;
  }
}

/**
 * Requests Node's HTTP parser refuses (a malformed request line or header, headers over the size
 * limit, a request that does not arrive in time) never reach Fastify's routes or error handler;
 * this answers them in the spec's error shape too, then closes the connection. Their Host is not
 * known, so `doc_url` uses PUBLIC_URL or `http://localhost`, as `publicOrigin` falls back to.
 * They carry an X-Request-Id as every answer does (the document says so): the request's id when
 * it has one (a body past its deadline, src/http/body-deadline.ts), else a new UUID.
 */
export function clientErrorHandler(publicUrl: string | undefined) {
  return (error: Error & { code?: string }, socket: Duplex, requestId: string = randomUUID()): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const [code, message]: [ErrorCode, string] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? ['request_too_large', 'The request headers are too large.']
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? ['bad_request', 'The request did not arrive in time.']
          : ['bad_request', 'The request is not valid HTTP.'];
    const { status, body } = errorBody(publicUrl ?? 'http://localhost', code, message);
    recordRefusal(code);
    const text = JSON.stringify(body);
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
          `X-Request-Id: ${requestId}\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
    }
    socket.destroy(error);
  };
}

/**
 * The `param` of a domain error: its own, or for a resource not found, the request parameter that
 * named it: the first of `places` (path parameters, then the body or a tool's arguments) holding
 * the identifier at its top level (UUIDs are compared without regard to case).
 */
export function paramOf(error: DomainError, ...places: unknown[]): string | undefined {
  if (error.param !== undefined || !(error instanceof NotFoundError) || error.id === undefined) return error.param;
  const id = error.id.toLowerCase();
  for (const place of places) {
    // Objects only: a body still in bytes (the MCP route's) names no field.
    if (typeof place !== 'object' || place === null || Array.isArray(place) || ArrayBuffer.isView(place)) continue;
    for (const [name, value] of Object.entries(place)) {
      if (typeof value === 'string' && value.toLowerCase() === id) return name;
    }
  }
  return undefined;
}

/** `Retry-After` of a 503 `service_unavailable` (whole seconds). */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/**
 * A statement the database refused because of what it was given (a duplicate, a missing
 * reference, a value it cannot store): the client's error; or a database that cannot be reached
 * (`service_unavailable`: the caller reports it to DatabaseOutages, which logs it once per
 * outage). Answered alike over REST and MCP.
 */
export function fromDatabase(error: unknown): { code: ErrorCode; message: string } | undefined {
  if (isDatabaseUnreachable(error)) {
    return {
      code: 'service_unavailable',
      message: 'The service cannot reach its database at the moment; retry after the `Retry-After` seconds.',
    };
  }
  if (isUniqueViolation(error)) return { code: 'conflict', message: 'The resource conflicts with an existing one.' };
  if (isForeignKeyViolation(error)) {
    return { code: 'invalid_parameters', message: 'A referenced resource does not exist.' };
  }
  if (isInputRejected(error)) {
    return {
      code: 'validation_error',
      message: 'A value could not be stored: it is malformed or too deeply nested.',
    };
  }
  return undefined;
}

/** What an operation writes, as far as its failures go. */
export type WriteKind = 'create' | 'update' | 'delete';

/**
 * What `operation` writes: its registry entry's `writes`, else what its method says (DELETE deletes,
 * PUT and PATCH update, a POST creates when it answers 201 and deletes when it is destructive: bulk
 * deletes, clears, purges). Undefined for reads and for POSTs that act (sync, apply, replay, …).
 */
export function writeKind(
  operation: Pick<Operation, 'method' | 'status' | 'destructive' | 'writes'> | undefined,
): WriteKind | undefined {
  if (operation === undefined) return undefined;
  if (operation.writes !== undefined) return operation.writes || undefined;
  if (operation.method === 'DELETE') return 'delete';
  if (operation.method === 'PUT' || operation.method === 'PATCH') return 'update';
  if (operation.method !== 'POST') return undefined;
  return operation.destructive ? 'delete' : operation.status === 201 ? 'create' : undefined;
}

const FAILED: Record<WriteKind, { code: ErrorCode; done: string }> = {
  create: { code: 'creation_failed', done: 'created' },
  update: { code: 'update_failed', done: 'updated' },
  delete: { code: 'deletion_failed', done: 'deleted' },
};

/**
 * The answer to a failure that is neither the client's nor an outage (the caller logs it under an
 * `event_id`): for a create, update or delete (`writeKind`), `creation_failed`, `update_failed` or
 * `deletion_failed`; for anything else `internal_error`. The one place REST (`errorAnswerer`) and
 * MCP (src/mcp/routes.ts) decide it. `canceled`: the statement ran past its time (57014).
 */
export function unexpectedFailure(
  operation: Parameters<typeof writeKind>[0],
  canceled: boolean,
): { code: ErrorCode; message: string } {
  const kind = writeKind(operation);
  const cause = canceled ? 'the request took too long and was canceled' : 'an unexpected error occurred';
  if (kind === undefined) {
    return {
      code: 'internal_error',
      message: canceled
        ? 'The request took too long and was canceled; it was logged.'
        : 'An unexpected error occurred; it was logged.',
    };
  }
  const { code, done } = FAILED[kind];
  return { code, message: `The resource could not be ${done}: ${cause}; it was logged. Retry the request.` };
}

/**
 * Node's error for a request whose client closed the connection before its body arrived (the
 * request stream's `aborted`). Its code is a socket's, as a lost database connection's is.
 */
const isClientAbort = (error: FastifyError) => error.code === 'ECONNRESET' && error.message === 'aborted';

/** An error as the spec's answer: the error body, its status and its content type. */
function sender(publicUrl: string | undefined) {
  return (
    request: FastifyRequest,
    reply: FastifyReply,
    code: ErrorCode,
    message: string,
    param?: string,
    eventId?: string,
  ) => {
    const { status, body } = errorBody(publicOrigin(request, publicUrl), code, message, param, eventId);
    recordRefusal(code);
    if (status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', UNAVAILABLE_RETRY_AFTER_S);
    if (status === 401)
      reply.header('www-authenticate', authChallenge(request.routeOptions?.config, request.url, code));
    return reply.code(status).type('application/json; charset=utf-8').send(body);
  };
}

/**
 * Answers any error in the spec's terms: the app's error handler, and the answer to the URLs the
 * router refuses before any hook runs (server.ts, `frameworkErrors`), whose request and reply are
 * Fastify's undecorated ones (this uses only what those have).
 */
export function errorAnswerer(
  publicUrl: string | undefined,
  outages?: Pick<DatabaseOutages, 'failed'>,
): (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  const send = sender(publicUrl);
  return (error, request, reply) => {
    if (error instanceof DomainError) {
      return send(request, reply, error.code, error.message, paramOf(error, request.params, request.body));
    }
    if (error.validation && error.validation.length > 0) {
      const first = error.validation[0] as ErrorObject;
      const mapped = fromValidation(error.validationContext ?? 'body', first);
      return send(request, reply, mapped.code, mapped.message, mapped.param);
    }
    const fastifyMapped = fromFastify(error);
    if (fastifyMapped) return send(request, reply, fastifyMapped.code, fastifyMapped.message);
    if (isClientAbort(error)) {
      // The client went away while sending its body: no one reads this answer, and nothing failed here.
      request.log.info('the client closed the connection before its body arrived');
      return send(request, reply, 'bad_request', 'The request body did not arrive whole.');
    }
    const refused = fromDatabase(error);
    if (refused?.code === 'service_unavailable') {
      // Once per outage, not a stack per request (src/db/outage.ts).
      if (outages) outages.failed(error);
      else request.log.warn({ error: { message: error.message, code: error.code } }, 'database unreachable');
    }
    if (refused) return send(request, reply, refused.code, refused.message);
    const canceled = isQueryCanceled(error);
    const eventId = newId();
    request.log.error({ event_id: eventId, err: summarize(error) }, canceled ? 'query canceled' : 'unexpected error');
    const failure = unexpectedFailure(request.routeOptions?.config?.operation, canceled);
    return send(request, reply, failure.code, failure.message, undefined, eventId);
  };
}

export function registerErrorHandling(
  app: FastifyInstance,
  publicUrl: string | undefined,
  outages?: Pick<DatabaseOutages, 'failed'>,
): void {
  app.setErrorHandler(errorAnswerer(publicUrl, outages));
  app.setNotFoundHandler(noRouteAnswerer(publicUrl));
}

/** Answers a request for a path (or method) with no route: 404 `not_found`. */
export function noRouteAnswerer(publicUrl: string | undefined): (request: FastifyRequest, reply: FastifyReply) => void {
  const send = sender(publicUrl);
  return (request, reply) => {
    send(request, reply, 'not_found', `No route: ${request.method} ${request.url.split('?')[0]}.`);
  };
}

/** What a log needs of an error, without query parameters or bodies that may hold user data. */
export function summarize(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const code = (error as { code?: unknown }).code;
  return { type: error.name, message: error.message, ...(code !== undefined ? { code } : {}), stack: error.stack };
}
