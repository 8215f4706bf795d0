// The export thread's side of a SpanBatch (span-batch.ts) for OTLP/HTTP with protobuf bodies, the
// protocol's default (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf): its numbers and strings written
// as the bytes of an ExportTraceServiceRequest (opentelemetry-proto, collector/trace/v1), with no
// span objects or SDK serializer between. Ids are their raw bytes and times fixed 64-bit
// nanoseconds, so a span takes about half the bytes and time of its JSON (span-json.ts); an
// attribute whose key and value both repeat is encoded once and copied from then on. Fields at
// their default (counts of dropped items, an unset status, no parent) are left out, as proto3 does.
//
// Plain JavaScript, for the thread's source, after SPAN_JSON_SOURCE (it uses its `anyValue` and `afterSpan`).
// `createSpanProtoWriter(timeOrigin, resource, schemaUrl, scopeName)` gives a writer with the same
// interface as `createSpanWriter`'s: `add(data, hasRoom, written)`, `count`, `take()`. `resource`
// is the Resource message's bytes (`resourceFields(attributes)`), `schemaUrl` its schema's or ''.
import { REQUEST_BUFFER_SOURCE } from './span-json.js';

export const SPAN_PROTO_SOURCE = `
const varintSize = (n) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);
/** A protobuf message's bytes, built from parts (the rare paths: the resource, JSON-typed values). */
const protoMessage = () => {
  const parts = [];
  const self = {
    varint(n) {
      const bytes = [];
      let v = n;
      while (v >= 0x80) {
        bytes.push((v % 0x80) | 0x80);
        v = Math.floor(v / 0x80);
      }
      bytes.push(v);
      parts.push(Buffer.from(bytes));
      return self;
    },
    tag: (field, wire) => self.varint(field * 8 + wire),
    bytes(field, data) {
      self.tag(field, 2).varint(data.length);
      parts.push(data);
      return self;
    },
    string: (field, text) => self.bytes(field, Buffer.from(text, 'utf8')),
    raw(data) {
      parts.push(data);
      return self;
    },
    done: () => Buffer.concat(parts),
  };
  return self;
};
/** An int64's varint, for any integer within int64 (a negative one is ten bytes: two's complement). */
const int64Bytes = (value) => {
  let v = BigInt.asUintN(64, BigInt(value));
  const bytes = [];
  while (v >= 0x80n) {
    bytes.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  bytes.push(Number(v));
  return Buffer.from(bytes);
};
/** OTLP's AnyValue message for a JavaScript value (as anyValue reads it). */
const anyValueBytes = (value) => {
  const m = protoMessage();
  if (typeof value === 'string') return m.string(1, value).done();
  if (typeof value === 'boolean') return m.tag(2, 0).varint(value ? 1 : 0).done();
  if (typeof value === 'number') {
    if (Number.isInteger(value) && Math.abs(value) < 2 ** 63) return m.tag(3, 0).raw(int64Bytes(value)).done();
    const double = Buffer.alloc(8);
    double.writeDoubleLE(value);
    return m.tag(4, 1).raw(double).done();
  }
  if (Array.isArray(value)) {
    const list = protoMessage();
    for (const item of value) list.bytes(1, anyValueBytes(item));
    return m.bytes(5, list.done()).done();
  }
  if (value !== null && typeof value === 'object') {
    const list = protoMessage();
    for (const key of Object.keys(value)) list.bytes(1, keyValueBytes(key, value[key]));
    return m.bytes(6, list.done()).done();
  }
  return m.done();
};
/** A KeyValue message from its key's UTF-8 bytes and its value's AnyValue bytes. */
const keyValue = (key, any) => protoMessage().bytes(1, key).bytes(2, any).done();
const keyValueBytes = (key, value) => keyValue(Buffer.from(key, 'utf8'), anyValueBytes(value));
/** The Resource message's fields: its attributes (a JavaScript object); the schema URL goes beside it. */
const resourceFields = (attributes) => {
  const m = protoMessage();
  for (const key of Object.keys(attributes)) m.bytes(1, keyValueBytes(key, attributes[key]));
  return m.done();
};

/** Whole attributes kept encoded at most (the strings they join are bounded too: span-batch.ts). */
const MAX_PAIRS = 20000;
function createSpanProtoWriter(timeOrigin, resource, schemaUrl, scopeName) {
  const utf8Of = (text) => Buffer.from(text, 'utf8');
  /** The repeated strings' UTF-8 bytes, and whole attributes whose key and value both repeat. */
  const table = [];
  const pairs = new Map();
  ${REQUEST_BUFFER_SOURCE}
  const byte = (b) => {
    out[pos++] = b;
  };
  const varint = (n) => {
    reserve(5);
    while (n >= 0x80) {
      out[pos++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    out[pos++] = n;
  };
  /** A length-delimited field's tag, then room for its length: \`close\` writes it once the content is in. */
  const open = (tag) => {
    reserve(3);
    out[pos++] = tag;
    pos += 2;
    return pos;
  };
  const close = (start) => {
    const length = pos - start;
    const size = varintSize(length);
    if (size !== 2) {
      reserve(size);
      out.copyWithin(start - 2 + size, start, pos);
      pos += size - 2;
    }
    let at = start - 2;
    let n = length;
    while (n >= 0x80) {
      out[at++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    out[at] = n;
  };
  const word = (w) => {
    reserve(4);
    out[pos++] = w >>> 24;
    out[pos++] = (w >>> 16) & 255;
    out[pos++] = (w >>> 8) & 255;
    out[pos++] = w & 255;
  };
  /** A performance.now() time as fixed64 Unix nanoseconds, little-endian, computed exactly in doubles. */
  const nanos = (ms) => {
    const at = timeOrigin + ms;
    const s = Math.floor(at / 1000);
    const rest = Math.min(Math.round((at - s * 1000) * 1e6), 999999999);
    // s·10⁹ + rest = (s·1953125)·2⁹ + rest, each part below 2⁵³.
    const a = s * 1953125;
    const aHigh = Math.floor(a / 4294967296);
    const low = (a - aHigh * 4294967296) * 512 + rest;
    const carry = Math.floor(low / 4294967296);
    reserve(8);
    out.writeUInt32LE(low - carry * 4294967296, pos);
    out.writeUInt32LE(aHigh * 512 + carry, pos + 4);
    pos += 8;
  };
  const stringField = (tag, data) => {
    reserve(6 + data.length);
    out[pos++] = tag;
    varint(data.length);
    bytes(data);
  };
  return {
    get count() {
      return count;
    },
    add({ numbers: n, length, strings, added }, hasRoom, written) {
      for (const text of added) table.push(utf8Of(text));
      const textOf = (ref) => (ref < 0 ? utf8Of(strings[-ref - 1]) : table[ref]);
      let at = 0;
      /** KeyValue fields (tag: the attributes' field) from the numbers at \`at\`. */
      const attributes = (tag) => {
        const total = n[at++];
        for (let i = 0; i < total; i++, at += 3) {
          const key = n[at];
          const type = n[at + 1];
          const v = n[at + 2];
          if (type === 0 && key >= 0 && v >= 0) {
            const id = key * 16384 + v; // both below MAX_REPEATED (span-batch.ts)
            let pair = pairs.get(id);
            if (pair === undefined) {
              pair = keyValue(table[key], protoMessage().bytes(1, table[v]).done());
              if (pairs.size < MAX_PAIRS) pairs.set(id, pair);
            }
            reserve(6 + pair.length);
            out[pos++] = tag;
            varint(pair.length);
            bytes(pair);
            continue;
          }
          const kv = open(tag);
          stringField(0x0a, textOf(key)); // key (1)
          if (type === 4) {
            stringField(0x12, anyValueBytes(JSON.parse(strings[-v - 1]))); // value (2)
            close(kv);
            continue;
          }
          const any = open(0x12); // value (2): AnyValue
          if (type === 0) stringField(0x0a, textOf(v)); // string_value (1)
          else if (type === 3) {
            reserve(2);
            out[pos++] = 0x10; // bool_value (2)
            out[pos++] = v === 1 ? 1 : 0;
          } else if (type === 1 && v >= 0 && Number.isSafeInteger(v)) {
            byte(0x18); // int_value (3)
            varintNumber(v);
          } else if (type === 1 && Math.abs(v) < 2 ** 63) {
            byte(0x18);
            bytes(int64Bytes(v));
          } else {
            reserve(9);
            out[pos++] = 0x21; // double_value (4): a fraction, or an integer past int64
            out.writeDoubleLE(v, pos);
            pos += 8;
          }
          close(any);
          close(kv);
        }
      };
      /** A varint of a non-negative integer up to 2⁵³ (an attribute's value). */
      const varintNumber = (value) => {
        reserve(8);
        let v = value;
        while (v >= 0x80) {
          out[pos++] = (v % 0x80) | 0x80;
          v = Math.floor(v / 0x80);
        }
        out[pos++] = v;
      };
      while (at < length) {
        const s = at;
        if (!hasRoom()) {
          at = afterSpan(n, s);
          continue;
        }
        at += 15;
        const span = open(0x12); // ScopeSpans.spans (2)
        reserve(40);
        byte(0x0a); // trace_id (1)
        byte(16);
        for (let i = 0; i < 4; i++) word(n[s + i]);
        byte(0x12); // span_id (2)
        byte(8);
        word(n[s + 4]);
        word(n[s + 5]);
        if (n[s + 6] || n[s + 7]) {
          byte(0x22); // parent_span_id (4)
          byte(8);
          word(n[s + 6]);
          word(n[s + 7]);
        }
        stringField(0x2a, textOf(n[s + 10])); // name (5)
        reserve(20);
        byte(0x30); // kind (6): SpanKind is 0–4, and OTLP's kind is one more
        byte(n[s + 9] + 1);
        byte(0x39); // start_time_unix_nano (7)
        nanos(n[s + 11]);
        byte(0x41); // end_time_unix_nano (8)
        nanos(n[s + 12]);
        attributes(0x4a); // attributes (9)
        for (let e = n[at++]; e > 0; e--) {
          const event = open(0x5a); // events (11)
          const name = n[at++];
          const time = n[at++];
          byte(0x09); // time_unix_nano (1)
          nanos(time);
          stringField(0x12, textOf(name)); // name (2)
          attributes(0x1a); // attributes (3)
          close(event);
        }
        const code = n[s + 13];
        const hasMessage = !Number.isNaN(n[s + 14]);
        if (code !== 0 || hasMessage) {
          const status = open(0x7a); // status (15)
          if (hasMessage) stringField(0x12, textOf(n[s + 14])); // message (2)
          if (code !== 0) {
            byte(0x18); // code (3)
            byte(code);
          }
          close(status);
        }
        reserve(6);
        byte(0x85); // flags (16), fixed32: W3C sampled, and whether the parent is remote is known (0x100), and true (0x200)
        byte(0x01);
        out.writeUInt32LE(n[s + 8] === 1 ? 0x301 : 0x101, pos);
        pos += 4;
        close(span);
        count++;
        written();
      }
    },
    take() {
      if (count === 0) return undefined;
      // ExportTraceServiceRequest { resource_spans (1): ResourceSpans { resource (1), scope_spans (2):
      // ScopeSpans { scope (1), spans (2)… }, schema_url (3) } }
      const spans = out.subarray(0, pos);
      const scope = protoMessage().string(1, scopeName).done();
      const scopeHead = protoMessage().bytes(1, scope).done();
      const scopeSpansLength = scopeHead.length + spans.length;
      const resourceSpansTail = schemaUrl ? protoMessage().string(3, schemaUrl).done() : Buffer.alloc(0);
      const resourceSpansHead = protoMessage().bytes(1, resource).tag(2, 2).varint(scopeSpansLength).done();
      const resourceSpansLength = resourceSpansHead.length + scopeSpansLength + resourceSpansTail.length;
      const head = protoMessage().tag(1, 2).varint(resourceSpansLength).raw(resourceSpansHead).raw(scopeHead).done();
      const body = Buffer.concat([head, spans, resourceSpansTail]);
      const request = { body, count };
      out = Buffer.allocUnsafe(Math.max(1 << 16, pos + 1024));
      pos = 0;
      count = 0;
      return request;
    },
  };
}
`;
