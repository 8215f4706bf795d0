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
