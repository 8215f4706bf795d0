// Tracing (OpenTelemetry): spans around requests, operations, tool calls, jobs, webhook deliveries
// and provider calls, and, when asked for, database statements. Off unless
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. Off, `withSpan`
// calls its function and nothing else: one check of a module variable.
//
// On, a span's parent is passed to it (a request's span is found from the request), not looked up
// in an ambient context: Node 20 carries an ambient context across `await`s only with a promise
// hook, which slows every promise of the process. That context is kept only where no handle can
// be passed: inside job runs and agent turns (only while one runs), and for every request when
// TRACE_DATABASE_STATEMENTS asks for a span per SQL statement.
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type Attributes,
  context,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { RecordedSpan } from './recorded-span.js';
import { samplerFromEnv } from './sampler.js';
import { type SpanExport, startSpanExport } from './span-export.js';

export type SpanAttributes = Attributes;

/** Makes spans: undefined when the trace is left out (sampled out, or its parent was). */
interface SpanSource {
  start(name: string, attributes: Attributes, kind: SpanKind, parent: Span | SpanContext | undefined): Span | undefined;
  /** A span with no known parent is left out (it could not nest), rather than made a trace of its own. */
  needsParent: boolean;
}

/** What makes spans while tracing is on; undefined while it is off (the common case, and the cheap one). */
let source: SpanSource | undefined;
/** Every request runs in the ambient context, so that its SQL statements find their parent. */
let statements = false;
let spanExport: SpanExport | undefined;

/** The span whose work is running, where the ambient context is kept (see above). */
const ambient = new AsyncLocalStorage<Span>();
/**
 * Job runs and operations with traced steps in progress: the ambient context is on while there is
 * one (or statements are traced).
 */
let ambientRuns = 0;

export function tracingEnabled(): boolean {
  return source !== undefined;
}

/**
 * Makes spans with `next` (tests: an SDK tracer and its in-memory exporter); undefined turns
 * tracing off. A span with no known parent takes the OpenTelemetry API's active context.
 */
export function setTracer(next: Tracer | undefined): void {
  source =
    next === undefined
      ? undefined
      : {
          needsParent: false,
          start(name, attributes, kind, parent) {
            const parentContext = parent && 'spanContext' in parent ? parent.spanContext() : parent;
            const from = parentContext ? trace.setSpanContext(ROOT_CONTEXT, parentContext) : context.active();
            const span = next.startSpan(name, { attributes, kind }, from);
            return span.isRecording() ? span : undefined;
          },
        };
}

/** A span, or undefined when tracing is off or the trace is left out; `parent` may be a caller's (remote). */
export function startSpan(
  name: string,
  attributes: Attributes,
  kind: SpanKind,
  parent: SpanContext | undefined,
): Span | undefined {
  return source?.start(name, attributes, kind, parent);
}

/** The span whose work is running, from the ambient context; undefined where none is kept. */
export function ambientSpan(): Span | undefined {
  return ambient.getStore();
}

/** Whether a request's work runs in the ambient context (TRACE_DATABASE_STATEMENTS). */
export function requestsCarryContext(): boolean {
  return statements;
}

/** Runs `fn` with `span` as the ambient span. */
export function runInSpan<T>(span: Span, fn: () => T): T {
  return ambient.run(span, fn);
}

/**
 * Runs `fn` in the ambient context (a job's run, or an operation whose steps start spans deep
 * inside it), turned off again once none runs (and statements are not traced).
 */
function runAmbient<T>(span: Span, fn: () => T): T {
  if (statements) return ambient.run(span, fn);
  ambientRuns++;
  const release = () => {
    if (--ambientRuns === 0 && !statements) ambient.disable();
  };
  let result: T;
  try {
    result = ambient.run(span, fn);
  } catch (error) {
    release();
    throw error;
  }
  if (!(result instanceof Promise)) {
    release();
    return result;
  }
  return result.then(
    (value) => {
      release();
      return value;
    },
    (error: unknown) => {
      release();
      throw error;
    },
  ) as T;
}

function failed(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  if (error instanceof Error) span.recordException(error);
}

/** Runs `fn(span)`, ending `span` when it returns or its promise settles; a throw or a rejection marks it failed. */
function settle<T>(span: Span, fn: (span?: Span) => T): T {
  let result: T;
  try {
    result = fn(span);
  } catch (error) {
    failed(span, error);
    span.end();
    throw error;
  }
  if (!(result instanceof Promise)) {
    span.end();
    return result;
  }
  return result.then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      failed(span, error);
      span.end();
      throw error;
    },
  ) as T;
}

/**
 * Runs `fn` inside a span named `name`, ended when `fn` returns or its promise settles; a throw or
 * a rejection marks the span as failed. With tracing off, `fn` alone runs. `fn` receives the span
 * (undefined when none is made) to add attributes found on the way.
 * `parent`: the span's parent; without it, the ambient span (inside a job run, or a request when
 * statements are traced); with neither, no span is made (it could not nest).
 * `root`: the span starts a trace of its own (a job's run, whatever request queued it), and its
 * work runs in the ambient context. `ambient`: its work runs in the ambient context, so spans
 * started deep inside it (an agent turn's search and provider calls) find it as their parent.
 * Inside a trace the sampler left out, no span is made.
 */
export function withSpan<T>(
  name: string,
  attributes: SpanAttributes,
  fn: (span?: Span) => T,
  options: { root?: boolean; ambient?: boolean; kind?: SpanKind; parent?: Span | undefined } = {},
): T {
  if (source === undefined) return fn();
  const { root = false, kind = SpanKind.INTERNAL } = options;
  let parent = root ? undefined : options.parent;
  const inherited = !root && parent === undefined;
  if (inherited) {
    parent = ambient.getStore();
    if (parent === undefined && source.needsParent) return fn();
  }
  const span = source.start(name, attributes, kind, parent);
  if (span === undefined) return fn();
  if (root || options.ambient) return runAmbient(span, () => settle(span, fn));
  if (statements || (inherited && parent !== undefined)) return ambient.run(span, () => settle(span, fn));
  return settle(span, fn);
}

/** The trace id of the ambient span (32 hex digits), or undefined when tracing is off or there is none. */
export function currentTraceId(): string | undefined {
  if (source === undefined) return undefined;
  const spanContext = (ambient.getStore() ?? trace.getActiveSpan())?.spanContext();
  return spanContext && trace.isSpanContextValid(spanContext) ? spanContext.traceId : undefined;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);

/**
 * Turns tracing on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set:
 * spans are sampled as OTEL_TRACES_SAMPLER says and exported over OTLP/HTTP (JSON) in batches
 * from a thread of their own, under the service name OTEL_SERVICE_NAME (`workspace-api` by
 * default). TRACE_DATABASE_STATEMENTS=true adds a span per SQL statement. Answers whether tracing is on.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (source !== undefined) return true;
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return false;
  const started = await startSpanExport(env, env.OTEL_SERVICE_NAME?.trim() || 'workspace-api');
  const sampled = samplerFromEnv(env);
  const sink = started.sink;
  spanExport = started;
  statements = TRUE.has(env.TRACE_DATABASE_STATEMENTS?.trim().toLowerCase() ?? '');
  source = {
    needsParent: true,
    start(name, attributes, kind, parent) {
      // A child of this process's span is recorded (its parent was); otherwise the sampler decides.
      if (parent instanceof RecordedSpan) return new RecordedSpan(sink, name, kind, attributes, parent);
      const remote = parent && 'spanContext' in parent ? parent.spanContext() : parent;
      return sampled(remote) ? new RecordedSpan(sink, name, kind, attributes, remote) : undefined;
    },
  };
  return true;
}

/** Sends the spans still held and stops exporting (shutdown); nothing while tracing is off. */
export async function stopTracing(): Promise<void> {
  const stopping = spanExport;
  source = undefined;
  spanExport = undefined;
  statements = false;
  if (ambientRuns === 0) ambient.disable();
  if (stopping) await stopping.stop();
}

/** Sends the spans ended so far without waiting for the next batch; nothing while tracing is off. */
export async function flushTracing(): Promise<void> {
  await spanExport?.flush();
}
