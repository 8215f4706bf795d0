// Ended spans as the export thread takes them: numbers in one buffer, handed over without a copy,
// and strings by index. Names, attribute keys and the values that repeat (routes, operation ids,
// tenants, statements' text) are sent once and named by their index from then on; the few that
// are each span's own (request ids, messages) travel beside the numbers. Copying objects to
// another thread costs microseconds a span; this costs a few writes to an array.
import type { Attributes } from '@opentelemetry/api';
import type { RecordedSpan } from './recorded-span.js';

/** Attribute values unique to a span: not kept in the table of repeated strings. */
const OWN_VALUES = new Set([
  'workspace.request_id',
  'workspace.job_id',
  'workspace.webhook_delivery_id',
  'exception.message',
  'exception.stacktrace',
]);

/** Strings kept by index at most (both threads hold them): past that, each is sent with its span. */
const MAX_REPEATED = 10_000;

/** What a batch hands over (`numbers` is transferred: this side no longer holds it). */
export interface SpanBatchData {
  numbers: Float64Array<ArrayBuffer>;
  length: number;
  /** This batch's own strings: index -1 is the first. */
  strings: string[];
  /** Strings added to the table since the last batch, in index order. */
  added: string[];
}

export class SpanBatch {
  #table = new Map<string, number>();
  #added: string[] = [];
  #strings: string[] = [];
  #numbers = new Float64Array(4096);
  #length = 0;
  /** Spans in the batch. */
  size = 0;

  #push(n: number): void {
    if (this.#length === this.#numbers.length) {
      const grown = new Float64Array(this.#numbers.length * 2);
      grown.set(this.#numbers);
      this.#numbers = grown;
    }
    this.#numbers[this.#length++] = n;
  }

  #own(text: string): number {
    this.#strings.push(text);
    return -this.#strings.length;
  }

  #repeated(text: string): number {
    let index = this.#table.get(text);
    if (index !== undefined) return index;
    if (this.#table.size >= MAX_REPEATED) return this.#own(text);
    index = this.#table.size;
    this.#table.set(text, index);
    this.#added.push(text);
    return index;
  }

  /** A count, then key, type (0 string, 1 integer, 2 double, 3 boolean, 4 JSON) and value for each. */
  #attributes(attributes: Attributes | undefined): void {
    const at = this.#length;
    this.#push(0);
    let count = 0;
    for (const key in attributes) {
      const value = attributes[key];
      if (value === undefined || value === null) continue;
      count++;
      this.#push(this.#repeated(key));
      if (typeof value === 'string') {
        this.#push(0);
        this.#push(OWN_VALUES.has(key) ? this.#own(value) : this.#repeated(value));
      } else if (typeof value === 'number') {
        this.#push(Number.isInteger(value) ? 1 : 2);
        this.#push(value);
      } else if (typeof value === 'boolean') {
        this.#push(3);
        this.#push(value ? 1 : 0);
      } else {
        this.#push(4);
        this.#push(this.#own(JSON.stringify(value)));
      }
    }
    this.#numbers[at] = count;
  }

  add(span: RecordedSpan): void {
    for (const word of span.ids) this.#push(word);
    this.#push(span.parentIsRemote ? 1 : 0);
    this.#push(span.kind);
    this.#push(this.#repeated(span.name));
    this.#push(span.start);
    this.#push(span.endedAt);
    this.#push(span.status.code);
    this.#push(span.status.message ? this.#own(span.status.message) : Number.NaN);
    this.#attributes(span.attributes);
    const events = span.events ?? [];
    this.#push(events.length);
    for (const event of events) {
      this.#push(this.#repeated(event.name));
      this.#push(event.time);
      this.#attributes(event.attributes);
    }
    this.size++;
  }

  /** The batch so far, emptied. */
  take(): SpanBatchData {
    const data = { numbers: this.#numbers, length: this.#length, strings: this.#strings, added: this.#added };
    this.#numbers = new Float64Array(Math.max(4096, this.#length));
    this.#length = 0;
    this.#strings = [];
    this.#added = [];
    this.size = 0;
    return data;
  }
}

/**
 * The worker's side (plain JavaScript, for its source), which reads the batch straight into OTLP
 * JSON (opentelemetry-proto's JSON mapping, as the SDK's serializer writes it): no span objects
 * in between. `spansAsJson(data, table, nanos, room, put)` calls `put` with each span's JSON while
 * `room()` says there is room, and skips the rest; `table` keeps the repeated strings already
 * quoted (escaped once, not at each span), `nanos(ms)` turns a performance.now() time into Unix
 * nanoseconds (a decimal string). `anyValue(value)` is OTLP's AnyValue of any attribute value.
 */
export const SPANS_JSON_SOURCE = `
const BYTES = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const hexWord = (w) => BYTES[w >>> 24] + BYTES[(w >>> 16) & 255] + BYTES[(w >>> 8) & 255] + BYTES[w & 255];
const anyValue = (value) =>
  typeof value === 'string' ? { stringValue: value }
  : typeof value === 'number' ? (Number.isInteger(value) ? { intValue: value } : { doubleValue: value })
  : typeof value === 'boolean' ? { boolValue: value }
  : Array.isArray(value) ? { arrayValue: { values: value.map(anyValue) } }
  : value !== null && typeof value === 'object'
    ? { kvlistValue: { values: Object.keys(value).map((key) => ({ key, value: anyValue(value[key]) })) } }
  : {};
/** The span's flags: W3C sampled, and whether its parent is remote is known (0x100) and true (0x200). */
const LOCAL_FLAGS = ',"flags":257}';
const REMOTE_FLAGS = ',"flags":769}';
function spansAsJson({ numbers, length, strings, added }, table, nanos, room, put) {
  for (const text of added) table.push(JSON.stringify(text));
  const text = (ref) => (ref < 0 ? JSON.stringify(strings[-ref - 1]) : table[ref]);
  const n = numbers;
  let at = 0;
  const attributes = () => {
    const count = n[at++];
    let json = '';
    for (let i = 0; i < count; i++, at += 3) {
      const type = n[at + 1];
      const v = n[at + 2];
      json += (i === 0 ? '{"key":' : ',{"key":') + text(n[at]) + ',"value":' + (
        type === 0 ? '{"stringValue":' + text(v) + '}}'
        : type === 1 ? '{"intValue":' + v + '}}'
        : type === 2 ? '{"doubleValue":' + (Number.isFinite(v) ? v : 'null') + '}}'
        : type === 3 ? (v === 1 ? '{"boolValue":true}}' : '{"boolValue":false}}')
        : JSON.stringify(anyValue(JSON.parse(strings[-v - 1]))) + '}');
    }
    return json;
  };
  const skipAttributes = () => {
    at += 1 + 3 * n[at];
  };
  while (at < length) {
    const s = at;
    at += 15;
    if (!room()) {
      skipAttributes();
      for (let events = n[at++]; events > 0; events--) {
        at += 2;
        skipAttributes();
      }
      continue;
    }
    const parent = n[s + 6] || n[s + 7] ? ',"parentSpanId":"' + hexWord(n[s + 6]) + hexWord(n[s + 7]) + '"' : '';
    const message = Number.isNaN(n[s + 14]) ? '' : ',"message":' + text(n[s + 14]);
    let json = '{"traceId":"' + hexWord(n[s]) + hexWord(n[s + 1]) + hexWord(n[s + 2]) + hexWord(n[s + 3]) +
      '","spanId":"' + hexWord(n[s + 4]) + hexWord(n[s + 5]) + '"' + parent +
      ',"name":' + text(n[s + 10]) + ',"kind":' + (n[s + 9] + 1) +
      ',"startTimeUnixNano":"' + nanos(n[s + 11]) + '","endTimeUnixNano":"' + nanos(n[s + 12]) +
      '","attributes":[' + attributes() + '],"droppedAttributesCount":0,"events":[';
    for (let events = n[at++], first = true; events > 0; events--, first = false) {
      const name = text(n[at++]);
      const time = nanos(n[at++]);
      json += (first ? '{"attributes":[' : ',{"attributes":[') + attributes() +
        '],"name":' + name + ',"timeUnixNano":"' + time + '","droppedAttributesCount":0}';
    }
    json += '],"droppedEventsCount":0,"status":{"code":' + n[s + 13] + message +
      '},"links":[],"droppedLinksCount":0' + (n[s + 8] === 1 ? REMOTE_FLAGS : LOCAL_FLAGS);
    put(json);
  }
}
`;
