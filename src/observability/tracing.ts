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
 * `root`: the span starts a trace of its own (a job's run, whatever request queued it). Inside a
 * trace the sampler left out (OTEL_TRACES_SAMPLER), no span is made.
 */
export function withSpan<T>(
  name: string,
  attributes: SpanAttributes,
  fn: (span?: Span) => T,
  options: { root?: boolean; kind?: SpanKind } = {},
): T {
  if (tracer === undefined) return fn();
  const { root = false, kind = SpanKind.INTERNAL } = options;
  // Inside a trace the sampler left out, a child would be left out too: none is made.
  if (!root && trace.getActiveSpan()?.isRecording() === false) return fn();
  return tracer.startActiveSpan(name, { attributes, kind, root }, (span) => {
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

/** Flushes and stops the SDK started by `startTracing`; undefined while tracing is off. */
let stopProvider: (() => Promise<void>) | undefined;
/** Sends the spans ended so far; undefined while tracing is off. */
let flushProvider: (() => Promise<void>) | undefined;

/** The tracer, for the modules that make request and database spans; undefined while tracing is off. */
export function activeTracer(): Tracer | undefined {
  return tracer;
}

/**
 * Turns tracing on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set:
 * loads the SDK, exports spans over OTLP/HTTP (JSON) in batches, and names the service
 * OTEL_SERVICE_NAME (`workspace-api` by default). The exporter reads the other standard OTEL_*
 * variables (headers, timeout) itself. Answers whether tracing is on.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (tracer !== undefined) return true;
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return false;
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { OTLPTraceExporter }, resources] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const resource = resources
    .defaultResource()
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(resources.resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || 'workspace-api' }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The W3C trace context propagator and the async-hooks context manager, so spans nest.
  provider.register();
  tracer = provider.getTracer('workspace-api');
  stopProvider = () => provider.shutdown();
  flushProvider = () => provider.forceFlush();
  return true;
}

/** Sends the spans still held and stops exporting (shutdown); nothing while tracing is off. */
export async function stopTracing(): Promise<void> {
  const stop = stopProvider;
  tracer = undefined;
  stopProvider = undefined;
  flushProvider = undefined;
  if (stop) await stop();
}

/** Sends the spans ended so far without waiting for the next batch; nothing while tracing is off. */
export async function flushTracing(): Promise<void> {
  await flushProvider?.();
}
