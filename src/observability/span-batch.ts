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

/** The worker's side (plain JavaScript, for its source): `decode(data, table)` gives the batch's spans as fields. */
export const DECODE_SOURCE = `
const BYTES = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const hexWord = (w) => BYTES[w >>> 24] + BYTES[(w >>> 16) & 255] + BYTES[(w >>> 8) & 255] + BYTES[w & 255];
function decode({ numbers, length, strings, added }, table) {
  for (const text of added) table.push(text);
  const text = (ref) => (ref < 0 ? strings[-ref - 1] : table[ref]);
  let at = 0;
  const attributes = () => {
    const count = numbers[at++];
    const found = {};
    for (let i = 0; i < count; i++) {
      const key = text(numbers[at++]);
      const type = numbers[at++];
      const value = numbers[at++];
      found[key] = type === 0 ? text(value) : type === 3 ? value === 1 : type === 4 ? JSON.parse(text(value)) : value;
    }
    return found;
  };
  const spans = [];
  while (at < length) {
    const n = numbers;
    const span = {
      traceId: hexWord(n[at]) + hexWord(n[at + 1]) + hexWord(n[at + 2]) + hexWord(n[at + 3]),
      spanId: hexWord(n[at + 4]) + hexWord(n[at + 5]),
      parentSpanId: n[at + 6] || n[at + 7] ? hexWord(n[at + 6]) + hexWord(n[at + 7]) : undefined,
      remote: n[at + 8] === 1,
      kind: n[at + 9],
      name: text(n[at + 10]),
      start: n[at + 11],
      end: n[at + 12],
      code: n[at + 13],
      message: Number.isNaN(n[at + 14]) ? undefined : text(n[at + 14]),
    };
    at += 15;
    span.attributes = attributes();
    span.events = [];
    for (let events = numbers[at++]; events > 0; events--) {
      const name = text(numbers[at++]);
      const time = numbers[at++];
      span.events.push({ name, time, attributes: attributes() });
    }
    spans.push(span);
  }
  return spans;
}
`;
