// What every request leaves behind: its count and duration in the metrics (labels resolved once
// per route), one JSON log line (request id, operation id, tenant, status, duration, trace id),
// and, with tracing on, a server span with the operation's handler in a child span of its own.
// Routes declared after `registerRequestObservability` are observed: call it before any.
import { type Span, type SpanContext, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
  type RouteHandlerMethod,
} from 'fastify';
import { requestRecorder } from '../observability/metrics.js';
import { requestsCarryContext, runInSpan, startSpan, tracingEnabled, withSpan } from '../observability/tracing.js';
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
function logRequest(request: FastifyRequest, reply: FastifyReply, operation: string, span: Span | undefined): void {
  if (!LOGS_INFO.has(request.log.level)) return;
  const traceId = span?.isRecording() ? span.spanContext().traceId : undefined;
  request.log.info(
    {
      req: request,
      operation_id: operation,
      tenant: request.auth?.tenantId ?? null,
      status: reply.statusCode,
      duration_ms: Math.round(reply.elapsedTime * 100) / 100,
      ...(traceId ? { trace_id: traceId } : {}),
    },
    'request completed',
  );
}

interface RequestSpan {
  span: Span;
  ended: boolean;
}

/**
 * The request's span, on the request itself (a property every request has from its start, set by
 * `decorateRequest`): a WeakMap of requests would be an ephemeron table for every garbage
 * collection to walk, which cost more than the spans.
 */
const SPAN = Symbol('request span');
const requestSpans = {
  get: (request: FastifyRequest) => (request as unknown as Record<symbol, RequestSpan | undefined>)[SPAN],
  set: (request: FastifyRequest, entry: RequestSpan) => {
    (request as unknown as Record<symbol, RequestSpan | undefined>)[SPAN] = entry;
  },
};

/** The request's server span: the parent of the spans of its work. Undefined when its trace is not recorded. */
export function requestSpan(request: FastifyRequest): Span | undefined {
  return requestSpans.get(request)?.span;
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
  const entry = requestSpans.get(request);
  if (!entry || entry.ended) return;
  entry.ended = true;
  const { span } = entry;
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

/** Tracing on: a server span per recorded request, and an operation's handler in a child span. */
function registerRequestSpans(app: FastifyInstance): void {
  app.decorateRequest(SPAN as unknown as string, undefined);
  app.addHook('onRequest', (request, _reply, done) => {
    if (!tracingEnabled()) return done();
    const route = request.routeOptions.url;
    // A caller's W3C `traceparent` makes this request's span a child of the caller's.
    const span = startSpan(
      `${request.method} ${route ?? UNMATCHED}`,
      {
        'http.request.method': request.method,
        ...(route ? { 'http.route': route } : {}),
        'workspace.request_id': request.id,
      },
      SpanKind.SERVER,
      callerSpan(request.headers.traceparent),
    );
    // A trace left out (sampled out): nothing more is done for it.
    if (span === undefined) return done();
    requestSpans.set(request, { span, ended: false });
    // Every line the request logs carries its trace: added to the request's own child logger
    // (Fastify's, one per request) rather than a child of it, which would cost a logger more.
    const traceId = { trace_id: span.spanContext().traceId };
    if (request.log === request.server.log) request.log = request.log.child(traceId);
    else (request.log as FastifyBaseLogger & { setBindings(bindings: object): void }).setBindings(traceId);
    if (requestsCarryContext()) runInSpan(span, done);
    else done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    endRequestSpan(request, 'aborted', request.is404 ? UNMATCHED : (request.routeOptions.url ?? UNMATCHED));
    done();
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
  return function traced(this: FastifyInstance, request, reply) {
    const span = requestSpans.get(request)?.span;
    if (span === undefined) return handler.call(this, request, reply);
    const run = () =>
      operation === undefined
        ? handler.call(this, request, reply)
        : withSpan(
            `operation ${operation.id}`,
            { 'workspace.operation_id': operation.id },
            () => handler.call(this, request, reply),
            { parent: span, ambient: operation.tracesSteps === true },
          );
    return requestsCarryContext() ? runInSpan(span, run) : run();
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
      const entry = tracing ? requestSpans.get(request) : undefined;
      logRequest(request, reply, name, entry?.span);
      if (entry) endRequestSpan(request, reply.statusCode, name);
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
    const entry = tracing ? requestSpans.get(request) : undefined;
    logRequest(request, reply, UNMATCHED, entry?.span);
    if (entry) endRequestSpan(request, reply.statusCode, UNMATCHED);
    done();
  });
}
