// The export thread's writers (span-writers.ts), evaluated as the thread evaluates them, and the
// spans of one request packed as the request's thread packs them.
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { RecordedSpan } from '../../src/observability/recorded-span.js';
import { SpanBatch } from '../../src/observability/span-batch.js';
import { type SpanWriter, spanWriters } from '../../src/observability/span-writers.js';

export const { createSpanWriter, createSpanProtoWriter, resourceFields } = spanWriters();
export type { SpanWriter };

export const CALLER = {
  traceId: '0123456789abcdef0123456789abcdef',
  spanId: 'fedcba9876543210',
  traceFlags: 1,
  isRemote: true,
};

/** A server span (a caller's child) and its operation span, which failed, packed as the request's thread packs them. */
export function packedRequest() {
  const batch = new SpanBatch();
  const ended: RecordedSpan[] = [];
  const sink = (span: RecordedSpan) => {
    ended.push(span);
    batch.add(span);
  };
  const attributes = { 'workspace.request_id': 'req "1"\n', 'http.response.status_code': 200, ratio: 0.5, ok: false };
  const server = new RecordedSpan(sink, 'GET /apps ü', SpanKind.SERVER, attributes, CALLER);
  const operation = new RecordedSpan(sink, 'operation listApps', SpanKind.INTERNAL, { tags: ['a', 'b'] }, server);
  operation.recordException(new Error('boom'));
  operation.setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
  operation.end();
  server.addEvent('first');
  server.end();
  return { data: batch.take(), server, operation };
}

/** A performance.now() time as the decimal Unix nanoseconds of OTLP JSON. */
export const nanos = (ms: number) => {
  const at = performance.timeOrigin + ms;
  const seconds = Math.floor(at / 1000);
  return `${seconds}${String(Math.min(Math.round((at - seconds * 1000) * 1e6), 999999999)).padStart(9, '0')}`;
};
