// Ended spans leave the process from a thread of their own. The request's thread only packs each
// span into a SpanBatch as it ends (the span object dies young) and hands the batch over once a
// second or every 2 048 spans: each hand-over wakes the other thread, which costs far more on a
// busy machine than the copy does. The thread writes them as OTLP protobuf (span-proto.ts) or, with
// OTEL_EXPORTER_OTLP_PROTOCOL=http/json, OTLP JSON (span-json.ts), and sends them (the SDK's
// OTLP/HTTP transport, which reads the OTEL_EXPORTER_OTLP_* variables itself), batched as the
// SDK's batch processor: OTEL_BSP_SCHEDULE_DELAY (5 000 ms), OTEL_BSP_MAX_QUEUE_SIZE (2 048; more
// are dropped), OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512).
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { exportProtocol } from './export-protocol.js';
import type { SpanSink } from './recorded-span.js';
import { SpanBatch } from './span-batch.js';
import { SPAN_WRITERS_SOURCE } from './span-writers.js';

// Plain JavaScript, evaluated as the worker (the server runs compiled, tests run TypeScript; a
// string runs the same under both). Spans arrive as SpanBatch data (span-batch.ts) and are queued
// as the bytes of an export request; the resource and the scope are written once, around its spans.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
${SPAN_WRITERS_SOURCE}
const SCOPE = 'workspace-api';
/** The JSON request's text before its spans and after them: the resource and the scope are written once. */
const jsonFrame = (resource) => {
  const attributes = Object.keys(resource.attributes).map((key) => ({ key, value: anyValue(resource.attributes[key]) }));
  const head =
    '{"resourceSpans":[{"resource":' + JSON.stringify({ attributes, droppedAttributesCount: 0 }) +
    (resource.schemaUrl ? ',"schemaUrl":' + JSON.stringify(resource.schemaUrl) : '') +
    ',"scopeSpans":[{"scope":{"name":"' + SCOPE + '"},"spans":[';
  return [head, ']}]}]}'];
};
const start = async () => {
  const { createOtlpHttpExportDelegate, convertLegacyHttpOptions } = require(workerData.transport);
  const resources = require(workerData.resources);
  const resource = resources
    .defaultResource()
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(resources.resourceFromAttributes({ 'service.name': workerData.serviceName }));
  await resource.waitForAsyncAttributes?.();
  const json = workerData.protocol === 'http/json';
  // The SDK's OTLP/HTTP transport (the OTEL_EXPORTER_OTLP_* variables, retries, compression),
  // given the request's body as written here.
  const exporter = createOtlpHttpExportDelegate(
    convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', {
      'Content-Type': json ? 'application/json' : 'application/x-protobuf',
    }),
    {
      serializeRequest: (request) => request.body,
      // The answer's partial success is not read: nothing would be done with it.
      deserializeResponse: () => ({}),
    },
    'otlp_http_span_exporter',
    { name: 'span', countItems: (request) => request.count },
    undefined,
  );
  const { maxQueue, batchSize, delay } = workerData;
  const writer = json
    ? createSpanWriter(workerData.timeOrigin, ...jsonFrame(resource))
    : createSpanProtoWriter(workerData.timeOrigin, resourceFields(resource.attributes), resource.schemaUrl || '', SCOPE);
  let sending = 0;
  const waiting = [];
  const settled = () => {
    if (sending === 0 && writer.count === 0) for (const answer of waiting.splice(0)) answer();
  };
  const send = () => {
    const request = writer.take();
    if (request === undefined) return;
    sending++;
    exporter.export(request, () => {
      sending--;
      settled();
    });
  };
  const hasRoom = () => writer.count < maxQueue;
  const written = () => {
    if (writer.count >= batchSize) send();
  };
  setInterval(send, delay).unref();
  parentPort.on('message', (message) => {
    if (message.spans) writer.add(message.spans, hasRoom, written);
    if (message.flush !== undefined) {
      send();
      waiting.push(() => parentPort.postMessage({ flushed: message.flush }));
      settled();
    }
    // The transport's kept-alive connections would hold the thread: it ends itself.
    if (message.stop) exporter.shutdown().finally(() => process.exit(0));
  });
};
start().then(
  () => parentPort.postMessage({ ready: true }),
  (error) => parentPort.postMessage({ ready: false, error: String((error && error.stack) || error) }),
);
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
const HAND_OVER = 2048;
const HAND_OVER_MS = 1000;

const setting = (value: string | undefined, fallback: number) => {
  const n = Number(value);
  return value && Number.isFinite(n) && n > 0 ? n : fallback;
};

const require = createRequire(import.meta.url);
/** The SDK's OTLP/HTTP transport, as the trace exporter (which depends on it) finds it. */
const transportPath = () =>
  createRequire(require.resolve('@opentelemetry/exporter-trace-otlp-http')).resolve(
    '@opentelemetry/otlp-exporter-base/node-http',
  );

/** The export thread, started, with `env` as its environment (the exporter's settings). */
async function startWorker(env: NodeJS.ProcessEnv, serviceName: string): Promise<Worker> {
  const protocol = exportProtocol(env);
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    env: { ...env },
    workerData: {
      maxQueue: setting(env.OTEL_BSP_MAX_QUEUE_SIZE, 2048),
      batchSize: setting(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512),
      delay: setting(env.OTEL_BSP_SCHEDULE_DELAY, 5000),
      transport: transportPath(),
      resources: require.resolve('@opentelemetry/resources'),
      serviceName,
      protocol,
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
