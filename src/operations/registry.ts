// The operation registry (DESIGN.md §6): one definition per operation, from which come the
// Fastify route (validation and serialization from the same TypeBox schemas), the OpenAPI
// document and the MCP tools. Scope checks, tenant scoping and error mapping live here once.
import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Scope } from '../domain/accounts/scopes.js';
import { BadRequestError, type ErrorCode, ValidationError } from '../domain/errors.js';
import type { Services } from '../domain/services.js';
import type { AuthContext } from '../http/auth.js';
import { operationBodyLimits } from '../http/body-limits.js';
import { ERROR_CATALOGUE } from '../http/errors.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface OperationContext<P, Q, B> {
  tenantId: string;
  auth: AuthContext;
  params: P;
  query: Q;
  body: B;
  services: Services;
  /**
   * The HTTP exchange, for the few operations that answer other than with one JSON record
   * (a Server-Sent Events stream). Absent when the operation runs as an MCP tool.
   */
  http?: { request: FastifyRequest; reply: FastifyReply };
}

/** A handler's answer with a status other than the operation's default (201 vs 200 on upsert). */
export class WithStatus<T> {
  constructor(
    readonly status: number,
    readonly body: T,
  ) {}
}
export const withStatus = <T>(status: number, body: T) => new WithStatus(status, body);

export interface OperationSpec<P extends TObject, Q extends TObject, B extends TSchema, R extends TSchema> {
  /** camelCase; the MCP tool name is its snake_case form. */
  id: string;
  method: HttpMethod;
  /** Fastify path syntax (`/api/v1/apps/:name`). */
  path: string;
  scope: Scope;
  tag: string;
  summary: string;
  /** Written for people and models: what it does, when to use it, what it returns. */
  description: string;
  params?: P;
  query?: Q;
  body?: B;
  response: R;
  /** Success status; 200 unless stated. Other success statuses a handler may pick. */
  status?: 200 | 201 | 202;
  alsoStatus?: (200 | 201)[];
  /**
   * Error codes this operation can answer beyond the ones every operation can. `not_found` comes
   * with path parameters; an operation without any that answers 404 for an id in its body lists it.
   */
  errors?: ErrorCode[];
  /** Deletes, clears, purges. */
  destructive?: boolean;
  /**
   * What it writes, when its method and status do not say it (src/http/errors.ts, `writeKind`):
   * an internal failure answers `creation_failed`, `update_failed` or `deletion_failed`; `false`
   * for a POST that writes nothing (internal_error).
   */
  writes?: 'create' | 'update' | 'delete' | false;
  /** Repeating the call with the same input changes nothing more. */
  idempotent?: boolean;
  /** The answer shows a secret once: a copy kept to replay it (Idempotency-Key) is sealed as the secret is. */
  secretAnswer?: boolean;
  /** Files, documents or batches of rows: the body may take BODY_LIMIT_BYTES (src/http/body-limits.ts). */
  largeBody?: boolean;
  /**
   * With `Accept: text/event-stream` the success answer is a Server-Sent Events stream (the handler
   * streams it): what its events are, for the document's `text/event-stream` content.
   */
  eventStream?: string;
  handler: (ctx: OperationContext<Static<P>, Static<Q>, Static<B>>) => Promise<Static<R> | WithStatus<Static<R>>>;
}

export interface Operation {
  id: string;
  method: HttpMethod;
  path: string;
  scope: Scope;
  tag: string;
  summary: string;
  description: string;
  params?: TObject;
  query?: TObject;
  body?: TSchema;
  response: TSchema;
  status?: 200 | 201 | 202;
  alsoStatus?: (200 | 201)[];
  errors?: ErrorCode[];
  destructive?: boolean;
  writes?: 'create' | 'update' | 'delete' | false;
  idempotent?: boolean;
  secretAnswer?: boolean;
  largeBody?: boolean;
  eventStream?: string;
  handler: (ctx: OperationContext<unknown, unknown, unknown>) => Promise<unknown>;
}

export function defineOperation<
  P extends TObject = TObject<Record<string, never>>,
  Q extends TObject = TObject<Record<string, never>>,
  B extends TSchema = TSchema,
  R extends TSchema = TSchema,
>(spec: OperationSpec<P, Q, B, R>): Operation {
  return spec as unknown as Operation;
}

export const toolName = (operationId: string) => operationId.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The error statuses an operation documents: every operation's, plus its own. */
function errorStatuses(op: Operation): number[] {
  const codes: ErrorCode[] = [
    'bad_request',
    'not_authenticated',
    'insufficient_scope',
    'validation_error',
    'rate_limit_exceeded',
    'internal_error',
    // The database cannot be reached, or the server is shutting down (Retry-After).
    'service_unavailable',
    // Headers over 16 KB, or a body over BODY_LIMIT_BYTES (sent even where none is taken).
    'request_too_large',
    ...(op.params ? (['not_found'] as const) : []),
    ...(op.errors ?? []),
  ];
  return [...new Set(codes.map((code) => ERROR_CATALOGUE[code].status))].sort();
}

declare module 'fastify' {
  interface FastifyContextConfig {
    operation?: Operation;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

/**
 * No body at all reads as an empty object: bodiless calls to operations whose fields are all
 * optional work, and a missing required field is named as such. A JSON `null` is a body, and not
 * an object: validation refuses it (400).
 */
async function emptyBodyAsObject(request: FastifyRequest) {
  if (request.body === undefined) request.body = {};
}

/**
 * An operation that takes no body takes none, or `{}` (which some clients send with every POST);
 * anything else would be silently ignored, so it is refused as an unknown field or a non-object.
 * The control plane's bodiless POSTs use it too (src/admin/routes.ts).
 */
export async function refuseBody(request: FastifyRequest) {
  const body = request.body;
  if (body === undefined) return;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestError('This operation takes no request body.');
  }
  const [field] = Object.keys(body);
  if (field !== undefined)
    throw new ValidationError(field, `Unknown parameter: ${field}; this operation takes no body.`);
}

export function mountOperations(
  app: FastifyInstance,
  operations: Operation[],
  services: Services,
  maxBodyBytes: number,
): void {
  const ErrorRef = Type.Ref('Error');
  for (const op of operations) {
    const response: Record<number, TSchema> = { [op.status ?? 200]: op.response };
    for (const status of op.alsoStatus ?? []) response[status] = op.response;
    for (const status of errorStatuses(op)) response[status] = ErrorRef;
    const bodyLimits = operationBodyLimits(op.largeBody, maxBodyBytes);
    app.route({
      method: op.method,
      url: op.path,
      bodyLimit: bodyLimits.bytes,
      config: { operation: op, bodyLimits, ...(op.secretAnswer ? { secretAnswer: true } : {}) },
      // Fastify reads no body for GET: nothing to refuse, and no hook on the hottest reads.
      ...(op.method === 'GET' ? {} : { preValidation: op.body ? emptyBodyAsObject : refuseBody }),
      schema: {
        operationId: op.id,
        tags: [op.tag],
        summary: op.summary,
        description: `${op.description}\n\nRequires scope \`${op.scope}\`.`,
        security: [{ ScopedAPIKeyAuth: [op.scope] }],
        'x-required-scope': op.scope,
        ...(op.params ? { params: op.params } : {}),
        ...(op.query ? { querystring: op.query } : {}),
        ...(op.body ? { body: op.body } : {}),
        response,
      },
      handler: async (request, reply) => {
        const auth = request.auth as AuthContext;
        const result = await op.handler({
          tenantId: auth.tenantId,
          auth,
          params: request.params,
          query: request.query,
          body: request.body,
          services,
          http: { request, reply },
        });
        // A handler that streamed its answer has already sent it.
        if (reply.sent) return reply;
        if (result instanceof WithStatus) {
          reply.code(result.status);
          return result.body;
        }
        reply.code(op.status ?? 200);
        return result;
      },
    });
  }
}
