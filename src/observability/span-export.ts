// Ended spans leave the process from a thread of their own: the request's thread only queues
// them and hands them over in small batches, soon enough that they die young (a span kept across
// garbage collections is copied, then promoted: that, not the span, would cost the most). The
// thread turns them into OTLP JSON and sends them (the SDK's exporter, which reads the
// OTEL_EXPORTER_OTLP_* variables itself), batched as the SDK's batch processor:
// OTEL_BSP_SCHEDULE_DELAY (5 000 ms), OTEL_BSP_MAX_QUEUE_SIZE (2 048; more are dropped),
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { SpanSink } from './recorded-span.js';
import { DECODE_SOURCE, SpanBatch } from './span-batch.js';

// Plain JavaScript, evaluated as the worker (the server runs compiled, tests run TypeScript; a
// string runs the same under both). Spans arrive as SpanBatch data (span-batch.ts).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
${DECODE_SOURCE}
Promise.all([import(workerData.exporter), import(workerData.resources)]).then(([{ OTLPTraceExporter }, resources]) => {
  const exporter = new OTLPTraceExporter();
  const resource = resources
    .defaultResource()
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(resources.resourceFromAttributes({ 'service.name': workerData.serviceName }));
  const scope = { name: 'workspace-api' };
  const hrTime = (ms) => {
    const at = workerData.timeOrigin + ms;
    const seconds = Math.floor(at / 1000);
    const nanos = Math.min(Math.round((at - seconds * 1000) * 1e6), 999999999);
    return [seconds, nanos];
  };
  const toSpan = ({ traceId, spanId, parentSpanId, remote, name, kind, start, end, attributes, code, message, events }) => ({
    name,
    kind,
    spanContext: () => ({ traceId, spanId, traceFlags: 1 }),
    parentSpanContext: parentSpanId ? { traceId, spanId: parentSpanId, traceFlags: 1, isRemote: remote } : undefined,
    startTime: hrTime(start),
    endTime: hrTime(end),
    attributes,
    droppedAttributesCount: 0,
    events: events.map((e) => ({ name: e.name, attributes: e.attributes, time: hrTime(e.time) })),
    droppedEventsCount: 0,
    status: message ? { code, message } : { code },
    links: [],
    droppedLinksCount: 0,
    resource,
    instrumentationScope: scope,
  });
  const { maxQueue, batchSize, delay } = workerData;
  const queue = [];
  const table = [];
  let sending = 0;
  const waiting = [];
  const settled = () => {
    if (sending === 0 && queue.length === 0) for (const answer of waiting.splice(0)) answer();
  };
  const send = () => {
    while (queue.length > 0) {
      sending++;
      exporter.export(queue.splice(0, batchSize).map(toSpan), () => {
        sending--;
        settled();
      });
    }
  };
  setInterval(send, delay).unref();
  parentPort.on('message', (message) => {
    if (message.spans) {
      for (const span of decode(message.spans, table)) if (queue.length < maxQueue) queue.push(span);
      if (queue.length >= batchSize) send();
    }
    if (message.flush !== undefined) {
      send();
      waiting.push(() => parentPort.postMessage({ flushed: message.flush }));
      settled();
    }
    // The exporter's kept-alive connections would hold the thread: it ends itself.
    if (message.stop) exporter.shutdown().finally(() => process.exit(0));
  });
  parentPort.postMessage({ ready: true });
}, (error) => parentPort.postMessage({ ready: false, error: String((error && error.stack) || error) }));
`;

export interface SpanExport {
  /** Queues an ended span. */
  sink: SpanSink;
  /** Resolves once every span ended so far has been sent (or failed to be). */
  flush(): Promise<void>;
  /** Sends what is queued, then stops the thread. */
  stop(): Promise<void>;
}

/** Spans handed to the thread at a time, and the longest a span waits to be. */
const HAND_OVER = 64;
const HAND_OVER_MS = 50;

const setting = (value: string | undefined, fallback: number) => {
  const n = Number(value);
  return value && Number.isFinite(n) && n > 0 ? n : fallback;
};

const moduleUrl = (name: string) => pathToFileURL(createRequire(import.meta.url).resolve(name)).href;

/** The export thread, started, with `env` as its environment (the exporter's settings). */
async function startWorker(env: NodeJS.ProcessEnv, serviceName: string): Promise<Worker> {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    env: { ...env },
    workerData: {
      maxQueue: setting(env.OTEL_BSP_MAX_QUEUE_SIZE, 2048),
      batchSize: setting(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512),
      delay: setting(env.OTEL_BSP_SCHEDULE_DELAY, 5000),
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
  return worker;
}

/** Starts the export thread, with `env` as its environment (the exporter's settings). */
export async function startSpanExport(env: NodeJS.ProcessEnv, serviceName: string): Promise<SpanExport> {
  const worker = await startWorker(env, serviceName);
  const batch = new SpanBatch();
  let gone = false;
  let handing = false;
  const hand = () => {
    handing = false;
    if (batch.size === 0) return;
    const spans = batch.take();
    if (!gone) worker.postMessage({ spans }, [spans.numbers.buffer as ArrayBuffer]);
  };
  const timer = setInterval(hand, HAND_OVER_MS);
  timer.unref();
  const flushes = new Map<number, () => void>();
  let nextFlush = 0;
  worker.on('message', (m: { flushed?: number }) => {
    if (m.flushed !== undefined) flushes.get(m.flushed)?.();
  });
  // A thread that fails or ends loses the spans it held, never the process, and nobody waits on it.
  const ended = () => {
    gone = true;
    for (const answer of flushes.values()) answer();
  };
  worker.on('error', ended);
  worker.on('exit', ended);
  const flush = () => {
    hand();
    if (gone) return Promise.resolve();
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
      batch.add(span);
      if (batch.size >= HAND_OVER && !handing) {
        handing = true;
        setImmediate(hand);
      }
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
      if (gone) return;
      const exited = new Promise((resolve) => worker.once('exit', resolve));
      worker.postMessage({ stop: true });
      await exited;
    },
  };
}
