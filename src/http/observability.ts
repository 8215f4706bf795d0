// What every request leaves behind: its count and duration in the metrics (labels resolved once
// per route), one JSON log line (request id, operation id, tenant, status, duration, trace id),
// and, with tracing on, a server span with the operation's handler in a child span of its own.
// Routes declared after `registerRequestObservability` are observed: call it before any.
import type { Socket } from 'node:net';
import { type Span, type SpanContext, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
  type RouteHandlerMethod,
} from 'fastify';
import { requestRecorder } from '../observability/metrics.js';
import {
  requestsCarryContext,
  runInSpan,
  type SpanAttributes,
  startSpan,
  tracingEnabled,
  withSpan,
} from '../observability/tracing.js';
import { hookList } from './hooks.js';

/** The operation label of a request to a path with no route (never the raw path). */
export const UNMATCHED = 'unmatched';

/** A route's name in metrics and logs: its registry operation id, its documented id, or its template. */
function routeName(route: { url: string; config?: { operation?: { id: string } }; schema?: unknown }): string {
  const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId;
  return route.config?.operation?.id ?? (typeof operationId === 'string' ? operationId : route.url);
}

/** The levels at which the request line (info) is written. */
const LOGS_INFO = new Set(['trace', 'debug', 'info']);

/** Fastify's own request lines off (given to Fastify as `logController`): `logRequest` writes one of its own. */
export function ownRequestLog(): LogController {
  return new LogController({ disableRequestLogging: true });
}

/** The request log line. */
function logRequest(request: FastifyRequest, reply: FastifyReply, operation: string): void {
  if (!LOGS_INFO.has(request.log.level)) return;
  request.log.info(
    {
      req: request,
      operation_id: operation,
      tenant: request.auth?.tenantId ?? null,
      status: reply.statusCode,
      duration_ms: Math.round(reply.elapsedTime * 100) / 100,
    },
    'request completed',
  );
}

/** The span of the request a logger is the child logger of (set while its trace is recorded). */
const LOGGER_SPAN = Symbol('logger span');

/**
 * The trace id of every line a request's logger writes (given to the logger as its `mixin`):
 * read from the request's span when a line is written, so a request that logs nothing at its
 * level costs no trace id string and no bindings rewritten.
 */
export function traceIdOfLine(_line: object, _level: number, logger: object): { trace_id?: string } {
  const span = (logger as Record<symbol, Span | undefined>)[LOGGER_SPAN];
  return span === undefined ? {} : { trace_id: span.spanContext().traceId };
}

/**
 * The request's span, on the request itself (a property every request has from its start, set by
 * `decorateRequest`): a WeakMap of requests would be an ephemeron table for every garbage
 * collection to walk, which cost more than the spans. It is ended once, when the response is sent
 * or the client goes away: an ended span no longer records.
 */
const SPAN = Symbol('request span');
const requestSpans = {
  get: (request: FastifyRequest) => (request as unknown as Record<symbol, Span | undefined>)[SPAN],
  set: (request: FastifyRequest, span: Span) => {
    (request as unknown as Record<symbol, Span | undefined>)[SPAN] = span;
  },
};

/** The request's server span: the parent of the spans of its work. Undefined when its trace is not recorded. */
export function requestSpan(request: FastifyRequest): Span | undefined {
  return requestSpans.get(request);
}

/** W3C Trace Context: `version-traceid-parentid-flags`, lower-case hex. */
const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(?:-|$)/;

/** The caller's span from its `traceparent` header, if it sent a valid one. */
function callerSpan(header: string | string[] | undefined): SpanContext | undefined {
  const match = typeof header === 'string' ? TRACEPARENT.exec(header.trim()) : null;
  if (match === null) return undefined;
  const [, version, traceId = '', spanId = '', flags = ''] = match;
  if (version === 'ff' || /^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
}

function endRequestSpan(request: FastifyRequest, status: number | 'aborted', operation: string): void {
  const span = requestSpans.get(request);
  if (span === undefined || !span.isRecording()) return;
  span.setAttribute('workspace.operation_id', operation);
  if (request.auth?.tenantId) span.setAttribute('workspace.tenant_id', request.auth.tenantId);
  if (status === 'aborted') {
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the client closed the connection' });
  } else {
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** The traced requests of a connection still waiting for their response (more than one when pipelined). */
const OPEN = Symbol('traced requests');
type TracedSocket = { [OPEN]?: Set<FastifyRequest> } & Pick<Socket, 'once'>;

/**
 * Keeps `request` until its response, so that its span ends as aborted if the connection closes
 * first. One listener per connection, on its first traced request, rather than one per request
 * (Fastify's `onRequestAbort` hook adds one to every request).
 */
function watchConnection(request: FastifyRequest): void {
  const socket = request.raw.socket as TracedSocket | undefined;
  if (socket === undefined || typeof socket.once !== 'function') return;
  let open = socket[OPEN];
  if (open === undefined) {
    const watched = new Set<FastifyRequest>();
    open = watched;
    socket[OPEN] = watched;
    socket.once('close', () => {
      for (const waiting of watched) endRequestSpan(waiting, 'aborted', operationOf(waiting));
      watched.clear();
    });
  }
  open.add(request);
}

/** The request answered: its connection no longer waits on it. */
function answered(request: FastifyRequest): void {
  (request.raw.socket as TracedSocket | undefined)?.[OPEN]?.delete(request);
}

/** A request's operation label, before its route's hooks have named it. */
const operationOf = (request: FastifyRequest) =>
  request.is404 ? UNMATCHED : routeName({ ...request.routeOptions, url: request.routeOptions.url ?? UNMATCHED });

/**
 * `GET /api/v1/apps`: a server span's name, made once per method and route, so that every
 * request's span carries the same string (the export looks names up by their text).
 */
const spanNames = new Map<string, Map<string, string>>();
function serverSpanName(method: string, route: string): string {
  let byMethod = spanNames.get(route);
  if (byMethod === undefined) {
    byMethod = new Map();
    spanNames.set(route, byMethod);
  }
  let name = byMethod.get(method);
  if (name === undefined) {
    name = `${method} ${route}`;
    byMethod.set(method, name);
  }
  return name;
}

/** Tracing on: a server span per recorded request, and an operation's handler in a child span. */
function registerRequestSpans(app: FastifyInstance): void {
  app.decorateRequest(SPAN as unknown as string, undefined);
  app.addHook('onRequest', (request, _reply, done) => {
    if (!tracingEnabled()) return done();
    const route = request.routeOptions.url;
    const attributes: SpanAttributes = { 'http.request.method': request.method, 'workspace.request_id': request.id };
    if (route) attributes['http.route'] = route;
    // A caller's W3C `traceparent` makes this request's span a child of the caller's.
    const span = startSpan(
      serverSpanName(request.method, route ?? UNMATCHED),
      attributes,
      SpanKind.SERVER,
      callerSpan(request.headers.traceparent),
    );
    // A trace left out (sampled out): nothing more is done for it.
    if (span === undefined) return done();
    requestSpans.set(request, span);
    watchConnection(request);
    // Every line the request logs carries its trace (traceIdOfLine): its logger names its span.
    // Fastify gives each request a child logger of its own; where it does not, one is made.
    if (request.log === request.server.log) request.log = request.log.child({});
    (request.log as unknown as Record<symbol, Span>)[LOGGER_SPAN] = span;
    if (requestsCarryContext()) runInSpan(span, done);
    else done();
  });
}

/**
 * An operation's handler in a child span `operation <id>` of the request's. Where requests carry
 * the ambient context, the handler runs in it again (the body may have been read in another).
 */
function tracedHandler(
  handler: RouteHandlerMethod,
  operation: { id: string; tracesSteps?: boolean | undefined } | undefined,
): RouteHandlerMethod {
  if (operation === undefined) {
    return function traced(this: FastifyInstance, request, reply) {
      const span = requestSpans.get(request);
      if (span === undefined || !requestsCarryContext()) return handler.call(this, request, reply);
      return runInSpan(span, () => handler.call(this, request, reply));
    };
  }
  const { id } = operation;
  const name = `operation ${id}`;
  const ambient = operation.tracesSteps === true;
  return function traced(this: FastifyInstance, request, reply) {
    const parent = requestSpans.get(request);
    if (parent === undefined) return handler.call(this, request, reply);
    const operate = () => handler.call(this, request, reply);
    const attributes = { 'workspace.operation_id': id };
    if (!requestsCarryContext()) return withSpan(name, attributes, operate, { parent, ambient });
    return runInSpan(parent, () => withSpan(name, attributes, operate, { parent, ambient }));
  };
}

export function registerRequestObservability(app: FastifyInstance, { tracing }: { tracing: boolean }): void {
  if (tracing) registerRequestSpans(app);
  app.addHook('onRoute', (route) => {
    const name = routeName(route);
    const method = Array.isArray(route.method) ? route.method.join(',') : route.method;
    const record = requestRecorder(name, method, 'rest');
    const observe = (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      record(reply.statusCode, reply.elapsedTime / 1000);
      logRequest(request, reply, name);
      if (tracing && requestSpans.get(request) !== undefined) {
        answered(request);
        endRequestSpan(request, reply.statusCode, name);
      }
      done();
    };
    route.onResponse = [...hookList(route.onResponse), observe];
    if (tracing) route.handler = tracedHandler(route.handler, route.config?.operation);
  });
  // A path with no route: its own fixed label, whatever the path.
  const unmatched = new Map<string, (status: number, seconds: number) => void>();
  app.addHook('onResponse', (request, reply, done) => {
    if (!request.is404) return done();
    let record = unmatched.get(request.method);
    if (record === undefined) {
      // Few: Node's HTTP parser takes only the methods it knows (http.METHODS).
      record = requestRecorder(UNMATCHED, request.method, 'rest');
      unmatched.set(request.method, record);
    }
    record(reply.statusCode, reply.elapsedTime / 1000);
    logRequest(request, reply, UNMATCHED);
    if (tracing && requestSpans.get(request) !== undefined) {
      answered(request);
      endRequestSpan(request, reply.statusCode, UNMATCHED);
    }
    done();
  });
}
