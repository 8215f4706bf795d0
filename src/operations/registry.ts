// The operation registry (DESIGN.md §6): one definition per operation, from which come the REST
// route (validation and serialization from the same TypeBox schemas), the OpenAPI document and the
// MCP tools. Every call runs through one pipeline (src/operations/invoke.ts): scope, validation,
// the handler, and the error catalogue (src/operations/errors.ts).
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { OwnerService } from '../domain/accounts/owners.js';
import type { Scope } from '../domain/accounts/scopes.js';
import type { Services } from '../domain/services.js';
import type { AuthContext } from './context.js';
import { ERROR_CATALOGUE, type ErrorCode } from './errors.js';

export type { Services };

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface OperationContext<P, Q, B> {
  tenantId: string;
  auth: AuthContext;
  params: P;
  query: Q;
  body: B;
  services: Services;
  /**
   * Present when the caller takes the answer as events (an operation with `eventStream`, called
   * over REST with `Accept: text/event-stream`): the handler writes them here and returns `STREAMED`.
   */
  events?: EventSink;
}

/** Where an operation streams its answer (Server-Sent Events over REST, src/http/negotiation.ts). */
export interface EventSink {
  /** Sends the stream's head; events written before it are held until then. */
  open(): void;
  event(type: string, data: unknown): void;
  /** A comment line, which keeps the connection alive. */
  comment(text: string): void;
  end(): void;
  /** Logs a failure that the stream can only report as an event. */
  logError(message: string, detail: Record<string, unknown>): void;
}

/** A handler's answer once it has streamed it through `events`. */
export const STREAMED = Symbol('streamed');

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
   * What it writes, when its method and status do not say it (src/operations/errors.ts, `writeKind`):
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
  /** Runs an agent turn: its steps (knowledge search, provider calls) are traced as children of the operation's span. */
  tracesSteps?: boolean;
  handler: (
    ctx: OperationContext<Static<P>, Static<Q>, Static<B>>,
  ) => Promise<Static<R> | WithStatus<Static<R>> | typeof STREAMED>;
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
  /** Runs an agent turn: its steps (knowledge search, provider calls) are traced as children of the operation's span. */
  tracesSteps?: boolean;
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
export function errorStatuses(op: Pick<Operation, 'params' | 'errors'>, operator = false): number[] {
  const codes: ErrorCode[] = [
    'bad_request',
    'not_authenticated',
    // The control plane's operator token has no scopes.
    ...(operator ? [] : (['insufficient_scope'] as const)),
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

/** What the control plane needs beyond the domain services: owners, and the key cache to clear. */
export interface ControlPlane {
  owners: OwnerService;
  /** A key's state changed here: every instance's cached judgement is dropped (this one's at once). */
  keysChanged(): void;
}

/** What a control-plane handler is given: the operator acts on every tenant, so there is none. */
export interface OperatorContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  services: Services;
  controlPlane: ControlPlane;
}

/** What only a workspace's operations have (and the handler, whose context differs). */
type WorkspaceOnly = 'scope' | 'tag' | 'handler' | 'largeBody' | 'eventStream' | 'secretAnswer' | 'tracesSteps';

/** An operation of the control plane (/admin/v1): authenticated by the operator token, not a key. */
export interface OperatorOperationSpec<P extends TObject, Q extends TObject, B extends TSchema, R extends TSchema>
  extends Omit<OperationSpec<P, Q, B, R>, WorkspaceOnly> {
  handler: (ctx: OperatorContext<Static<P>, Static<Q>, Static<B>>) => Promise<Static<R> | WithStatus<Static<R>>>;
}

export interface OperatorOperation extends Omit<Operation, WorkspaceOnly> {
  handler: (ctx: OperatorContext<unknown, unknown, unknown>) => Promise<unknown>;
}

export function defineOperatorOperation<
  P extends TObject = TObject<Record<string, never>>,
  Q extends TObject = TObject<Record<string, never>>,
  B extends TSchema = TSchema,
  R extends TSchema = TSchema,
>(spec: OperatorOperationSpec<P, Q, B, R>): OperatorOperation {
  return spec as unknown as OperatorOperation;
}
