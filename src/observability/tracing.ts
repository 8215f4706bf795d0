// Tracing (OpenTelemetry): spans around requests, operations, database statements, jobs, webhook
// deliveries and provider calls. Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: then `startTracing` loads the SDK (a dynamic
// import, so a process without tracing never loads it). Off, `withSpan` calls its function and
// nothing else: one check of a module variable.
import { type Attributes, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';

export type SpanAttributes = Attributes;

/** The tracer while tracing is on; undefined while it is off (the common case, and the cheap one). */
let tracer: Tracer | undefined;

export function tracingEnabled(): boolean {
  return tracer !== undefined;
}

/** Sets the tracer (startTracing, and tests); undefined turns tracing off. */
export function setTracer(next: Tracer | undefined): void {
  tracer = next;
}

function failed(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  if (error instanceof Error) span.recordException(error);
}

/**
 * Runs `fn` inside a span named `name` (a child of the active span), ended when `fn` returns or
 * its promise settles; a throw or a rejection marks the span as failed. With tracing off, `fn`
 * alone runs. `fn` receives the span (undefined when off) to add attributes found on the way.
 */
export function withSpan<T>(name: string, attributes: SpanAttributes, fn: (span?: Span) => T): T {
  if (tracer === undefined) return fn();
  return tracer.startActiveSpan(name, { attributes, kind: SpanKind.INTERNAL }, (span) => {
    let result: T;
    try {
      result = fn(span);
    } catch (error) {
      failed(span, error);
      span.end();
      throw error;
    }
    if (result instanceof Promise) {
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
    span.end();
    return result;
  });
}

/** The trace id of the active span (32 hex digits), or undefined when tracing is off or no span is active. */
export function currentTraceId(): string | undefined {
  if (tracer === undefined) return undefined;
  const context = trace.getActiveSpan()?.spanContext();
  return context && trace.isSpanContextValid(context) ? context.traceId : undefined;
}
