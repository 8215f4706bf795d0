// The export thread's OTLP protobuf (src/observability/span-proto.ts): spans packed by SpanBatch
// come out as an ExportTraceServiceRequest that reads back as the same spans the JSON writer
// writes (ids, times, typed attributes, events, status, flags), whatever their size; spans past
// the queue's room are skipped whole; and the protocol is read from the standard variables.
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { exportProtocol } from '../../src/observability/export-protocol.js';
import { RecordedSpan } from '../../src/observability/recorded-span.js';
import { SpanBatch } from '../../src/observability/span-batch.js';
import { decodeTraceExport } from '../support/otlp-proto.js';
import {
  createSpanProtoWriter,
  createSpanWriter,
  packedRequest,
  resourceFields,
  type SpanWriter,
} from '../support/packed-spans.js';

const HEAD = '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"test"},"spans":[';
const TAIL = ']}]}]}';

const protoWriter = () => createSpanProtoWriter(performance.timeOrigin, resourceFields({}), '', 'test');
const everything = () => true;
const nothing = () => {};

/** The spans of a writer's next request, read back (protobuf) or parsed (JSON). */
const protoSpans = (writer: SpanWriter) => {
  const request = writer.take();
  if (!request) throw new Error('nothing was written');
  return decodeTraceExport(request.body).resourceSpans[0]?.scopeSpans[0]?.spans ?? [];
};
const jsonSpans = (writer: SpanWriter) => JSON.parse(String(writer.take()?.body)).resourceSpans[0].scopeSpans[0].spans;

describe('the OTLP protobuf of packed spans', () => {
  it("the tests' reader reads the SDK's own protobuf as the SDK's JSON (its field numbers are the protocol's)", () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const span = provider.getTracer('test').startSpan('GET /x ü', {
      kind: SpanKind.SERVER,
      attributes: { a: 'b', n: 200, d: 0.5, ok: true, negative: -3, list: ['x'] },
    });
    span.addEvent('event', { k: 'v' });
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
    span.end();
    const spans = exporter.getFinishedSpans();
    const proto = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) ?? new Uint8Array());
    const json = JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)));
    const read = decodeTraceExport(proto).resourceSpans[0]?.scopeSpans[0]?.spans[0];
    expect(read).toMatchObject({ name: 'GET /x ü', kind: 2, status: { code: 2, message: 'boom' } });
    expect(read?.attributes).toHaveLength(6);
    expect(read?.events).toHaveLength(1);
    expect(json.resourceSpans[0].scopeSpans[0].spans[0]).toMatchObject(read ?? { missing: true });
  });

  it("reads back as the JSON writer's spans: ids, times, typed attributes, events, status and flags", () => {
    const { data } = packedRequest();
    const proto = protoWriter();
    const json = createSpanWriter(performance.timeOrigin, HEAD, TAIL);
    proto.add(data, everything, nothing);
    json.add(data, everything, nothing);
    expect(proto.count).toBe(2);
    const spans = protoSpans(proto);
    expect(spans).toEqual(jsonSpans(json));
    expect(spans[1]).toMatchObject({ name: 'GET /apps ü', kind: 2, flags: 0x301 });
    expect(proto.take()).toBeUndefined();
  });

  it('writes spans of every size, numbers of every kind, and an attribute repeated on a span and its event', () => {
    const batch = new SpanBatch();
    const sink = (span: RecordedSpan) => batch.add(span);
    const bare = new RecordedSpan(sink, 'x', SpanKind.INTERNAL, {}, undefined); // under 128 bytes: a 1-byte length
    bare.end();
    const big = new RecordedSpan(sink, 'big', SpanKind.CLIENT, { same: 'value' }, bare); // over 16 KiB: 3 bytes
    big.addEvent('same', { same: 'value', negative: -5, large: 2 ** 40, beyond: 2 ** 70, fraction: -0.25 });
    big.recordException(Object.assign(new Error('long'), { stack: 'at line\n'.repeat(3000) }));
    big.end();
    const data = batch.take();
    const proto = protoWriter();
    const json = createSpanWriter(performance.timeOrigin, HEAD, TAIL);
    proto.add(data, everything, nothing);
    json.add(data, everything, nothing);
    const spans = protoSpans(proto);
    const written = jsonSpans(json);
    // JSON writes 2⁷⁰ as an integer it cannot hold in int64; protobuf as a double.
    written[1].events[0].attributes[3].value = { doubleValue: 2 ** 70 };
    expect(spans).toEqual(written);
    expect(spans[1]?.events?.[0]?.attributes).toEqual([
      { key: 'same', value: { stringValue: 'value' } },
      { key: 'negative', value: { intValue: -5 } },
      { key: 'large', value: { intValue: 2 ** 40 } },
      { key: 'beyond', value: { doubleValue: 2 ** 70 } },
      { key: 'fraction', value: { doubleValue: -0.25 } },
    ]);
    expect(spans[1]?.parentSpanId).toBe(spans[0]?.spanId);
  });

  it('skips the spans past the room left, and reads the next batch whole', () => {
    const writer = protoWriter();
    let room = 1;
    writer.add(packedRequest().data, () => room-- > 0, nothing);
    expect(protoSpans(writer).map((s) => s.name)).toEqual(['operation listApps']);
    writer.add(packedRequest().data, everything, nothing);
    expect(protoSpans(writer).map((s) => s.name)).toEqual(['operation listApps', 'GET /apps ü']);
    // The first span skipped, with its event's attributes: the next is read from where it starts.
    let asked = 0;
    const afterTheFirst = () => asked++ > 0;
    writer.add(packedRequest().data, afterTheFirst, nothing);
    expect(protoSpans(writer)).toMatchObject([{ name: 'GET /apps ü', kind: 2, events: [{ name: 'first' }] }]);
  });

  it('writes the resource and the scope around the spans', () => {
    const writer = createSpanProtoWriter(
      performance.timeOrigin,
      resourceFields({ 'service.name': 'api', 'process.pid': 42, tags: ['a'] }),
      'https://opentelemetry.io/schemas/1.24.0',
      'workspace-api',
    );
    writer.add(packedRequest().data, everything, nothing);
    const request = decodeTraceExport(writer.take()?.body ?? Buffer.alloc(0));
    expect(request.resourceSpans).toHaveLength(1);
    expect(request.resourceSpans[0]).toMatchObject({
      resource: {
        attributes: [
          { key: 'service.name', value: { stringValue: 'api' } },
          { key: 'process.pid', value: { intValue: 42 } },
          { key: 'tags', value: { arrayValue: { values: [{ stringValue: 'a' }] } } },
        ],
      },
      schemaUrl: 'https://opentelemetry.io/schemas/1.24.0',
      scopeSpans: [{ scope: { name: 'workspace-api' } }],
    });
    expect(request.resourceSpans[0]?.scopeSpans[0]?.spans).toHaveLength(2);
  });
});

describe('the export protocol', () => {
  it('is http/protobuf unless OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL says http/json', () => {
    expect(exportProtocol({})).toBe('http/protobuf');
    expect(exportProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe('http/json');
    expect(
      exportProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }),
    ).toBe('http/protobuf');
  });

  it('refuses grpc, naming the variable: a configuration error at start when tracing is on', () => {
    expect(() => exportProtocol({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc is not supported/,
    );
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/);
    // Without an endpoint tracing is off, and the variable is not read.
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).not.toThrow();
  });
});
