// The export thread's OTLP JSON (src/observability/span-json.ts): spans packed by SpanBatch come
// out as opentelemetry-proto's JSON mapping (hex ids, Unix nanoseconds as strings, typed
// attribute values, events, status, flags), and spans past the queue's room are skipped whole.
import { describe, expect, it } from 'vitest';
import { CALLER, createSpanWriter, nanos, packedRequest, type SpanWriter } from '../support/packed-spans.js';

const HEAD = '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"test"},"spans":[';
const TAIL = ']}]}]}';

describe('the OTLP JSON of packed spans', () => {
  it('writes each span as OTLP/JSON, nested by parent id, its attributes typed', () => {
    const { data, server, operation } = packedRequest();
    const writer = createSpanWriter(performance.timeOrigin, HEAD, TAIL);
    writer.add(
      data,
      () => true,
      () => {},
    );
    const request = writer.take();
    expect(request?.count).toBe(2);
    const spans = JSON.parse(String(request?.body)).resourceSpans[0].scopeSpans[0].spans;
    const [op, srv] = spans;
    expect(srv).toMatchObject({
      traceId: CALLER.traceId,
      spanId: server.spanContext().spanId,
      parentSpanId: CALLER.spanId,
      name: 'GET /apps ü',
      kind: 2,
      startTimeUnixNano: nanos(server.start),
      endTimeUnixNano: nanos(server.endedAt),
      attributes: [
        { key: 'workspace.request_id', value: { stringValue: 'req "1"\n' } },
        { key: 'http.response.status_code', value: { intValue: 200 } },
        { key: 'ratio', value: { doubleValue: 0.5 } },
        { key: 'ok', value: { boolValue: false } },
      ],
      events: [{ name: 'first' }],
      status: { code: 0 },
      flags: 0x301,
    });
    expect(op).toMatchObject({
      traceId: CALLER.traceId,
      spanId: operation.spanContext().spanId,
      parentSpanId: server.spanContext().spanId,
      kind: 1,
      attributes: [{ key: 'tags', value: { arrayValue: { values: [{ stringValue: 'a' }, { stringValue: 'b' }] } } }],
      status: { code: 2, message: 'boom' },
      flags: 0x101,
    });
    expect(op.events[0].name).toBe('exception');
    expect(op.events[0].attributes.map((a: { key: string }) => a.key)).toEqual([
      'exception.type',
      'exception.message',
      'exception.stacktrace',
    ]);
    expect(writer.take()).toBeUndefined();
  });

  it('skips the spans past the room left, and reads the next batch whole', () => {
    const writer = createSpanWriter(performance.timeOrigin, HEAD, TAIL);
    let room = 1;
    writer.add(
      packedRequest().data,
      () => room-- > 0,
      () => {},
    );
    const names = (request: ReturnType<SpanWriter['take']>) =>
      JSON.parse(String(request?.body)).resourceSpans[0].scopeSpans[0].spans.map((s: { name: string }) => s.name);
    expect(names(writer.take())).toEqual(['operation listApps']);
    writer.add(
      packedRequest().data,
      () => true,
      () => {},
    );
    expect(names(writer.take())).toEqual(['operation listApps', 'GET /apps ü']);
    // The first span skipped, with its event's attributes: the next is read from where it starts.
    let asked = 0;
    writer.add(
      packedRequest().data,
      () => asked++ > 0,
      () => {},
    );
    expect(names(writer.take())).toEqual(['GET /apps ü']);
  });
});
