// The export thread's side of a SpanBatch (span-batch.ts): its numbers and strings written as the
// bytes of an OTLP/JSON export request, with no span objects, strings or SDK serializer between:
// building a span's JSON out of small strings, then flattening and encoding them, cost the thread
// more than sending it. The JSON is opentelemetry-proto's JSON mapping as the SDK writes it (ids
// in hex, times as decimal strings of Unix nanoseconds), less the fields at their default, which
// the mapping leaves out (counts of dropped items at zero, no links, no events).
//
// Plain JavaScript, for the thread's source. `createSpanWriter(timeOrigin, head, tail)` gives a
// writer: `add(data, hasRoom, written)` writes each of a batch's spans while `hasRoom()` says
// there is room, skipping the rest, and calls `written()` after each; `count` is the spans written
// so far; `take()` gives `{ body, count }` (undefined if none) and starts the next request. A
// request is `head`, the spans separated by commas, then `tail`. `anyValue(value)` is OTLP's AnyValue.
/**
 * The request being written, as declarations both writers' sources include: `out` (grown as
 * needed by `reserve(n)`), `pos`, the spans written `count`, and `bytes(b)` to copy a Buffer in
 * (small ones byte by byte, which is faster than `set` below a few dozen).
 */
export const REQUEST_BUFFER_SOURCE = `let out = Buffer.allocUnsafe(1 << 16);
  let pos = 0;
  let count = 0;
  const reserve = (n) => {
    if (pos + n <= out.length) return;
    const grown = Buffer.allocUnsafe(Math.max(out.length * 2, pos + n));
    out.copy(grown, 0, 0, pos);
    out = grown;
  };
  const bytes = (b) => {
    reserve(b.length);
    if (b.length > 24) {
      out.set(b, pos);
      pos += b.length;
    } else for (let i = 0; i < b.length; i++) out[pos++] = b[i];
  };`;

export const SPAN_JSON_SOURCE = `
const anyValue = (value) =>
  typeof value === 'string' ? { stringValue: value }
  : typeof value === 'number' ? (Number.isInteger(value) ? { intValue: value } : { doubleValue: value })
  : typeof value === 'boolean' ? { boolValue: value }
  : Array.isArray(value) ? { arrayValue: { values: value.map(anyValue) } }
  : value !== null && typeof value === 'object'
    ? { kvlistValue: { values: Object.keys(value).map((key) => ({ key, value: anyValue(value[key]) })) } }
  : {};
/** The index just past the span SpanBatch packed at \`at\`: 15 numbers, its attributes (a count, then 3 each), its events (a count, then name, time and attributes each). */
const afterSpan = (n, at) => {
  at += 15;
  at += 1 + 3 * n[at];
  for (let events = n[at++]; events > 0; events--) at += 3 + 3 * n[at + 2];
  return at;
};
const HEX = Buffer.from(Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0')).join(''), 'latin1');
const J = (text) => Buffer.from(text, 'utf8');
const TRACE = J('{"traceId":"'), SPAN = J('","spanId":"'), PARENT = J('","parentSpanId":"'), NAME = J('","name":');
const KIND = J(',"kind":'), START = J(',"startTimeUnixNano":"'), END = J('","endTimeUnixNano":"');
const ATTRIBUTES = J('","attributes":['), EVENTS = J('],"events":[{"attributes":['), EVENT = J('},{"attributes":[');
const EVENT_NAME = J('],"name":'), EVENT_TIME = J(',"timeUnixNano":"'), STATUS = J(',"status":{"code":');
const MESSAGE = J(',"message":'), FLAGS = J('},"flags":'), KEY = J('{"key":'), NEXT_KEY = J(',{"key":');
const STRING = J(',"value":{"stringValue":'), INT = J(',"value":{"intValue":'), DOUBLE = J(',"value":{"doubleValue":');
const BOOL = J(',"value":{"boolValue":'), ANY = J(',"value":'), TRUE = J('true}}'), FALSE = J('false}}');
/** W3C sampled, and whether the parent is remote is known (0x100), and true (0x200). */
const LOCAL = J('257}'), REMOTE = J('769}');

function createSpanWriter(timeOrigin, head, tail) {
  const headBytes = J(head);
  const tailBytes = J(tail);
  /** The repeated strings, as the bytes of their JSON. */
  const table = [];
  ${REQUEST_BUFFER_SOURCE}
  let second = -1;
  let secondDigits = J('');
  const ascii = (text) => {
    reserve(text.length);
    for (let i = 0; i < text.length; i++) out[pos++] = text.charCodeAt(i);
  };
  const utf8 = (text) => {
    reserve(text.length * 3);
    pos += out.write(text, pos, 'utf8');
  };
  const hex = (word) => {
    reserve(8);
    for (let shift = 24; shift >= 0; shift -= 8) {
      const b = (word >>> shift) & 255;
      out[pos++] = HEX[2 * b];
      out[pos++] = HEX[2 * b + 1];
    }
  };
  /** A performance.now() time as Unix nanoseconds: the second's digits, then nine more. */
  const nanos = (ms) => {
    const at = timeOrigin + ms;
    const s = Math.floor(at / 1000);
    if (s !== second) {
      second = s;
      secondDigits = J(String(s));
    }
    bytes(secondDigits);
    reserve(9);
    let rest = Math.min(Math.round((at - s * 1000) * 1e6), 999999999);
    for (let i = pos + 8; i >= pos; i--) {
      out[i] = 48 + (rest % 10);
      rest = Math.floor(rest / 10);
    }
    pos += 9;
  };
  return {
    get count() {
      return count;
    },
    add({ numbers: n, length, strings, added }, hasRoom, written) {
      for (const text of added) table.push(J(JSON.stringify(text)));
      const text = (ref) => (ref < 0 ? utf8(JSON.stringify(strings[-ref - 1])) : bytes(table[ref]));
      let at = 0;
      const attributes = () => {
        const total = n[at++];
        for (let i = 0; i < total; i++, at += 3) {
          bytes(i === 0 ? KEY : NEXT_KEY);
          text(n[at]);
          const type = n[at + 1];
          const v = n[at + 2];
          if (type === 0) {
            bytes(STRING);
            text(v);
            ascii('}}');
          } else if (type === 1 || type === 2) {
            bytes(type === 1 ? INT : DOUBLE);
            ascii(Number.isFinite(v) ? String(v) : 'null');
            ascii('}}');
          } else if (type === 3) {
            bytes(BOOL);
            bytes(v === 1 ? TRUE : FALSE);
          } else {
            bytes(ANY);
            utf8(JSON.stringify(anyValue(JSON.parse(strings[-v - 1]))));
            ascii('}');
          }
        }
      };
      while (at < length) {
        const s = at;
        if (!hasRoom()) {
          at = afterSpan(n, s);
          continue;
        }
        at += 15;
        if (count === 0) bytes(headBytes);
        else ascii(',');
        bytes(TRACE);
        for (let i = 0; i < 4; i++) hex(n[s + i]);
        bytes(SPAN);
        hex(n[s + 4]);
        hex(n[s + 5]);
        if (n[s + 6] || n[s + 7]) {
          bytes(PARENT);
          hex(n[s + 6]);
          hex(n[s + 7]);
        }
        bytes(NAME);
        text(n[s + 10]);
        bytes(KIND);
        reserve(1);
        out[pos++] = 49 + n[s + 9]; // one digit: SpanKind is 0–4, and OTLP's kind is one more
        bytes(START);
        nanos(n[s + 11]);
        bytes(END);
        nanos(n[s + 12]);
        bytes(ATTRIBUTES);
        attributes();
        const events = n[at++];
        for (let e = 0; e < events; e++) {
          bytes(e === 0 ? EVENTS : EVENT);
          const name = n[at++];
          const time = n[at++];
          attributes();
          bytes(EVENT_NAME);
          text(name);
          bytes(EVENT_TIME);
          nanos(time);
          ascii('"');
        }
        ascii(events > 0 ? '}]' : ']');
        bytes(STATUS);
        reserve(1);
        out[pos++] = 48 + n[s + 13]; // one digit: 0–2
        if (!Number.isNaN(n[s + 14])) {
          bytes(MESSAGE);
          text(n[s + 14]);
        }
        bytes(FLAGS);
        bytes(n[s + 8] === 1 ? REMOTE : LOCAL);
        count++;
        written();
      }
    },
    take() {
      if (count === 0) return undefined;
      bytes(tailBytes);
      const request = { body: out.subarray(0, pos), count };
      out = Buffer.allocUnsafe(Math.max(1 << 16, pos + 1024));
      pos = 0;
      count = 0;
      return request;
    },
  };
}
`;
