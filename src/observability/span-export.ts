// Ended spans leave the process from a thread of their own: the request's thread only queues
// them and hands a batch over now and then; turning them into OTLP JSON and sending them (the
// SDK's exporter, which reads the OTEL_EXPORTER_OTLP_* variables itself) happens in the worker.
// Batches as the SDK's batch processor: OTEL_BSP_SCHEDULE_DELAY (5 000 ms),
// OTEL_BSP_MAX_QUEUE_SIZE (2 048; more are dropped), OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { RecordedSpan, SpanSink } from './recorded-span.js';

// Plain JavaScript, evaluated as the worker (the server runs compiled, tests run TypeScript; a
// string runs the same under both). Spans arrive as arrays (see `compact`).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
Promise.all([import(workerData.exporter), import(workerData.resources)]).then(([{ OTLPTraceExporter }, resources]) => {
  const exporter = new OTLPTraceExporter();
  const resource = resources
    .defaultResource()
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(resources.resourceFromAttributes({ 'service.name': workerData.serviceName }));
  const scope = { name: 'workspace-api' };
  const hrTime = (ms) => {
    const nanos = Math.round((workerData.timeOrigin + ms) * 1e6);
    return [Math.floor(nanos / 1e9), nanos % 1e9];
  };
  const toSpan = ([traceId, spanId, parentSpanId, name, kind, start, end, attributes, code, message, events, remote]) => ({
    name,
    kind,
    spanContext: () => ({ traceId, spanId, traceFlags: 1 }),
    parentSpanContext: parentSpanId ? { traceId, spanId: parentSpanId, traceFlags: 1, isRemote: remote } : undefined,
    startTime: hrTime(start),
    endTime: hrTime(end),
    attributes,
    droppedAttributesCount: 0,
    events: (events || []).map((e) => ({ name: e.name, attributes: e.attributes, time: hrTime(e.time) })),
    droppedEventsCount: 0,
    status: message ? { code, message } : { code },
    links: [],
    droppedLinksCount: 0,
    resource,
    instrumentationScope: scope,
  });
  let sending = 0;
  const waiting = [];
  const settled = () => {
    if (sending === 0) for (const answer of waiting.splice(0)) answer();
  };
  parentPort.on('message', (message) => {
    if (message.spans) {
      sending++;
      exporter.export(message.spans.map(toSpan), () => {
        sending--;
        settled();
      });
    }
    if (message.flush !== undefined) {
      waiting.push(() => parentPort.postMessage({ flushed: message.flush }));
      settled();
    }
    // The exporter's kept-alive connections would hold the thread: it ends itself.
    if (message.stop) exporter.shutdown().finally(() => process.exit(0));
  });
  parentPort.postMessage({ ready: true });
}, (error) => parentPort.postMessage({ ready: false, error: String((error && error.stack) || error) }));
`;

/** A span as the worker takes it: an array, cheaper to copy across threads than an object. */
function compact(span: RecordedSpan): unknown[] {
  return [
    span.context.traceId,
    span.context.spanId,
    span.parentSpanId,
    span.name,
    span.kind,
    span.start,
    span.endedAt,
    span.attributes,
    span.status.code,
    span.status.message,
    span.events,
    span.parentIsRemote,
  ];
}

export interface SpanExport {
  /** Queues an ended span. */
  sink: SpanSink;
  /** Resolves once every span ended so far has been sent (or failed to be). */
  flush(): Promise<void>;
  /** Sends what is queued, then stops the thread. */
  stop(): Promise<void>;
}

const setting = (value: string | undefined, fallback: number) => {
  const n = Number(value);
  return value && Number.isFinite(n) && n > 0 ? n : fallback;
};

const moduleUrl = (name: string) => pathToFileURL(createRequire(import.meta.url).resolve(name)).href;

/** Starts the export thread, with `env` as its environment (the exporter's settings). */
export async function startSpanExport(env: NodeJS.ProcessEnv, serviceName: string): Promise<SpanExport> {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    env: { ...env },
    workerData: {
      exporter: moduleUrl('@opentelemetry/exporter-trace-otlp-http'),
      resources: moduleUrl('@opentelemetry/resources'),
      serviceName,
      timeOrigin: performance.timeOrigin,
    },
  });
  await new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (m: { ready: boolean; error?: string }) =>
      m.ready ? resolve() : reject(new Error(`the span export thread did not start: ${m.error}`)),
    );
  });
  // Not a reason to stay up: a process that ends without `stop` loses the spans still queued.
  worker.unref();
  const maxQueue = setting(env.OTEL_BSP_MAX_QUEUE_SIZE, 2048);
  const batchSize = setting(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512);
  const queue: RecordedSpan[] = [];
  let handing = false;
  const hand = () => {
    handing = false;
    for (let at = 0; at < queue.length; at += batchSize) {
      worker.postMessage({ spans: queue.slice(at, at + batchSize).map(compact) });
    }
    queue.length = 0;
  };
  const timer = setInterval(hand, setting(env.OTEL_BSP_SCHEDULE_DELAY, 5000));
  timer.unref();
  const flushes = new Map<number, () => void>();
  let nextFlush = 0;
  worker.on('message', (m: { flushed?: number }) => {
    if (m.flushed !== undefined) flushes.get(m.flushed)?.();
  });
  const flush = () => {
    hand();
    const id = nextFlush++;
    return new Promise<void>((resolve) => {
      flushes.set(id, () => {
        flushes.delete(id);
        resolve();
      });
      worker.postMessage({ flush: id });
    });
  };
  return {
    sink(span) {
      if (queue.length >= maxQueue) return;
      queue.push(span);
      if (queue.length >= batchSize && !handing) {
        handing = true;
        setImmediate(hand);
      }
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
      const exited = new Promise((resolve) => worker.once('exit', resolve));
      worker.postMessage({ stop: true });
      await exited;
    },
  };
}
