// Typed errors thrown by the domain. They name a code of the spec's error table and, where one
// field is at fault, its path (`files[3].path`); the error catalogue (src/operations/errors.ts)
// gives each its status and body, over REST, MCP and the control plane alike.

export type ErrorCode =
  | 'not_authenticated'
  | 'invalid_api_key'
  | 'insufficient_scope'
  | 'not_found'
  | 'bad_request'
  | 'validation_error'
  | 'missing_required_parameter'
  | 'invalid_parameters'
  | 'conflict'
  | 'too_many_items'
  | 'empty_items'
  | 'ambiguous_addressing'
  | 'creation_failed'
  | 'update_failed'
  | 'deletion_failed'
  | 'export_failed'
  | 'request_too_large'
  | 'rate_limit_exceeded'
  | 'concurrency_limit_exceeded'
  | 'turn_limit_exceeded'
  | 'forbidden_origin'
  | 'service_unavailable'
  | 'internal_error';

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export class NotFoundError extends DomainError {
  /** `id`: the identifier as the request gave it; the HTTP layer names the parameter that held it. */
  constructor(
    what: string,
    readonly id?: string,
  ) {
    super('not_found', id === undefined ? `No such ${what}.` : `No such ${what}: '${id}'.`);
  }
}

export class ConflictError extends DomainError {
  constructor(message: string, param?: string) {
    super('conflict', message, param);
  }
}

export class ValidationError extends DomainError {
  constructor(param: string, message: string) {
    super('validation_error', message, param);
  }
}

export class MissingParameterError extends DomainError {
  constructor(param: string, message = `Missing required parameter: ${param}.`) {
    super('missing_required_parameter', message, param);
  }
}

export class InvalidParametersError extends DomainError {
  constructor(param: string, message: string) {
    super('invalid_parameters', message, param);
  }
}

export class BadRequestError extends DomainError {
  constructor(message: string, param?: string) {
    super('bad_request', message, param);
  }
}

/** Bulk operations: at most this many items per request (spec, Limits). */
export const MAX_BULK_ITEMS = 100;

/** Checks a bulk item list: 0 → `empty_items`, over 100 → `too_many_items` (422, DESIGN.md §4). */
export function checkBulkItems(param: string, items: readonly unknown[]): void {
  if (items.length === 0) throw new DomainError('empty_items', `${param} must contain at least one item.`, param);
  if (items.length > MAX_BULK_ITEMS) {
    throw new DomainError(
      'too_many_items',
      `${param} has ${items.length} items; at most ${MAX_BULK_ITEMS} are allowed per request.`,
      param,
    );
  }
}
