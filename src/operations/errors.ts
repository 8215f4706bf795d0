// The error catalogue (spec: Errors; DESIGN.md §4), the same over REST, MCP and the control plane:
// every error answers `{error: {type, code, message, param?, doc_url, event_id?}}`, its status and
// type from the code's entry here, never from message text; and the one normalisation of a failure
// (a domain refusal, a database's, or an unexpected one) into such an answer.
import type { ErrorObject } from 'ajv';
import type { DatabaseOutages } from '../db/index.js';
import {
  isDatabaseUnreachable,
  isForeignKeyViolation,
  isInputRejected,
  isQueryCanceled,
  isUniqueViolation,
} from '../db/index.js';
import { DomainError, type ErrorCode, NotFoundError } from '../domain/errors.js';
import { newId } from '../lib/ids.js';
import type { Operation } from './registry.js';

// The adapters throw and name errors from here, without reaching into the domain.
export { DomainError, type ErrorCode } from '../domain/errors.js';

export type ErrorType =
  | 'authentication_error'
  | 'permission_error'
  | 'invalid_request_error'
  | 'rate_limit_error'
  | 'api_error';

/** `Retry-After` of a 503 `service_unavailable` (whole seconds). */
export const UNAVAILABLE_RETRY_AFTER_S = 5;
/** `Retry-After` of a turn refused at its tenant's cap: places free as turns end. */
const TURN_RETRY_AFTER_S = 5;

export interface CatalogueEntry {
  status: number;
  type: ErrorType;
  condition: string;
  /** The `Retry-After` an HTTP answer carries, unless the refusal set its own. */
  retryAfterS?: number;
}

export const ERROR_CATALOGUE: Record<ErrorCode, CatalogueEntry> = {
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
    retryAfterS: TURN_RETRY_AFTER_S,
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
    retryAfterS: UNAVAILABLE_RETRY_AFTER_S,
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

/** What a log needs of an error, without query parameters or bodies that may hold user data. */
export function summarize(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const code = (error as { code?: unknown }).code;
  return { type: error.name, message: error.message, ...(code !== undefined ? { code } : {}), stack: error.stack };
}

/** A failure as the answer it gets: its code, message, the parameter at fault, and the logged event. */
export interface Failure {
  code: ErrorCode;
  message: string;
  param?: string;
  eventId?: string;
}

export interface FailureContext {
  /** The operation that failed, when one did: what it writes decides an unexpected failure's code. */
  operation?: Parameters<typeof writeKind>[0];
  /** Where a resource not found may have been named (path parameters, the body, a tool's arguments). */
  places?: unknown[];
  /** Told of a failure for want of the database (logged once per outage). */
  outages?: Pick<DatabaseOutages, 'failed'> | undefined;
  /** Logs an unexpected failure under its `event_id`. */
  logUnexpected: (eventId: string, error: unknown, canceled: boolean) => void;
}

/**
 * Any failure of an operation in the spec's terms, the one decision REST, MCP and the control plane
 * share: a domain refusal keeps its code; a database's refusal is the client's error or an outage
 * (`service_unavailable`, reported to the outages); anything else is logged under a new `event_id`
 * and answers `unexpectedFailure`.
 */
export function failureOf(error: unknown, context: FailureContext): Failure {
  if (error instanceof DomainError) {
    const param = paramOf(error, ...(context.places ?? []));
    return { code: error.code, message: error.message, ...(param !== undefined ? { param } : {}) };
  }
  const refused = fromDatabase(error);
  if (refused?.code === 'service_unavailable') context.outages?.failed(error);
  if (refused) return refused;
  const canceled = isQueryCanceled(error);
  const eventId = newId();
  context.logUnexpected(eventId, error, canceled);
  return { ...unexpectedFailure(context.operation, canceled), eventId };
}
