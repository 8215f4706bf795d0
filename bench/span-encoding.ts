// What the export thread spends encoding spans, in this process: `npm run bench:span-encoding`.
// The spans of row reads (a server span with its six attributes and an operation span, as
// src/http/observability.ts makes them), packed as the request's thread packs them, written as
// OTLP protobuf and as OTLP JSON by the thread's own encoders (src/observability/span-writers.ts),
// requests of 512 spans. Prints each encoding's median time and size a span over BENCH_ROUNDS (7).
import { SpanKind } from '@opentelemetry/api';
import { RecordedSpan } from '../src/observability/recorded-span.js';
import { SpanBatch, type SpanBatchData } from '../src/observability/span-batch.js';
import { type SpanWriter, spanWriters } from '../src/observability/span-writers.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const BATCHES = 20;
const REQUESTS = 1024; // a hand-over: 2 048 spans
const ROUTE = '/api/v1/custom-data-sources/:key/rows/:rowId';

/** The spans of REQUESTS row reads, packed by `batch` (one per writer: it names repeated strings once). */
function packedRowReads(batch: SpanBatch): SpanBatchData {
  const sink = (span: RecordedSpan) => batch.add(span);
  for (let i = 0; i < REQUESTS; i++) {
    const attributes = { 'http.request.method': 'GET', 'workspace.request_id': `req-${i}`, 'http.route': ROUTE };
    const server = new RecordedSpan(sink, `GET ${ROUTE}`, SpanKind.SERVER, attributes, undefined);
    const operation = { 'workspace.operation_id': 'getCustomDataSourceRow' };
    new RecordedSpan(sink, 'operation getCustomDataSourceRow', SpanKind.INTERNAL, operation, server).end();
    server.setAttributes({
      'workspace.operation_id': 'getCustomDataSourceRow',
      'workspace.tenant_id': 'bench-tenant',
      'http.response.status_code': 200,
    });
    server.end();
  }
  return batch.take();
}

/** Microseconds and bytes a span, writing every batch with `writer`. */
function round(writer: SpanWriter, batches: SpanBatchData[]): { us: number; bytes: number } {
  let bytes = 0;
  let spans = 0;
  const take = () => {
    const request = writer.take();
    if (request) {
      bytes += request.body.length;
      spans += request.count;
    }
  };
  const started = process.hrtime.bigint();
  for (const data of batches) {
    writer.add(
      data,
      () => true,
      () => {
        if (writer.count >= 512) take();
      },
    );
  }
  take();
  return { us: Number(process.hrtime.bigint() - started) / 1000 / spans, bytes: bytes / spans };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

const writers = spanWriters();
const encodings: Record<string, () => SpanWriter> = {
  protobuf: () =>
    writers.createSpanProtoWriter(
      performance.timeOrigin,
      writers.resourceFields({ 'service.name': 'bench' }),
      '',
      'workspace-api',
    ),
  json: () =>
    writers.createSpanWriter(
      performance.timeOrigin,
      '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"workspace-api"},"spans":[',
      ']}]}]}',
    ),
};
// As in the export thread, one writer per encoding for the whole run, fed by one SpanBatch; each
// round packs new spans. The first round is warm-up.
const runs = Object.entries(encodings).map(([name, make]) => ({ name, writer: make(), batch: new SpanBatch() }));
const results: Record<string, { us: number[]; bytes: number }> = {};
for (let r = 0; r <= ROUNDS; r++) {
  for (const { name, writer, batch } of runs) {
    const batches = Array.from({ length: BATCHES }, () => packedRowReads(batch));
    const { us, bytes } = round(writer, batches);
    if (r === 0) continue;
    results[name] ??= { us: [], bytes };
    results[name].us.push(us);
  }
}
console.log(`${BATCHES * REQUESTS * 2} spans of row reads a round, median of ${ROUNDS} rounds\n`);
console.log('| encoding | µs a span | bytes a span |');
console.log('| --- | ---: | ---: |');
for (const [name, { us, bytes }] of Object.entries(results)) {
  console.log(`| ${name} | ${median(us).toFixed(2)} | ${Math.round(bytes)} |`);
}
