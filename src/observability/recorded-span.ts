// A span as this process records it: a plain object of the OpenTelemetry `Span` interface, which
// on `end` joins the export queue. What the SDK's span does at each start (a context object, an
// attribute copy, a processor chain) it does not: a request's spans cost a few hundred nanoseconds.
import { randomFillSync } from 'node:crypto';
import type {
  Attributes,
  AttributeValue,
  Exception,
  Link,
  Span,
  SpanContext,
  SpanKind,
  SpanStatus,
  TimeInput,
} from '@opentelemetry/api';
import { SpanStatusCode, TraceFlags } from '@opentelemetry/api';

/** Random words drawn 4 KiB at a time, for ids (four a trace, two a span), kept as numbers until a string is asked for. */
const pool = new Uint32Array(1024);
let used = pool.length;

function randomWord(): number {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  return pool[used++] as number;
}

const BYTES = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const hexWord = (w: number) => `${BYTES[w >>> 24]}${BYTES[(w >>> 16) & 255]}${BYTES[(w >>> 8) & 255]}${BYTES[w & 255]}`;
/** Four (trace) or two (span) words of a hex id. */
const wordsOf = (id: string) =>
  Array.from({ length: id.length / 8 }, (_, i) => Number.parseInt(id.slice(i * 8, i * 8 + 8), 16));

const UNSET: SpanStatus = Object.freeze({ code: SpanStatusCode.UNSET });

export interface SpanEvent {
  name: string;
  attributes: Attributes | undefined;
  /** performance.now() milliseconds. */
  time: number;
}

/** Called with each span that ends. */
export type SpanSink = (span: RecordedSpan) => void;

export class RecordedSpan implements Span {
  /** The trace id's words, then the span id's, then the parent's (0, 0: none). */
  readonly ids: number[];
  /** The parent came from another process (a caller's `traceparent`). */
  readonly parentIsRemote: boolean;
  /** performance.now() milliseconds; `endedAt` is NaN until the span ends. */
  readonly start = performance.now();
  endedAt = Number.NaN;
  /** Unset (shared, never changed) until `setStatus`. */
  status: SpanStatus = UNSET;
  events: SpanEvent[] | undefined;
  #context: SpanContext | undefined;

  constructor(
    private readonly sink: SpanSink,
    public name: string,
    readonly kind: SpanKind,
    readonly attributes: Attributes,
    parent: RecordedSpan | SpanContext | undefined,
  ) {
    const s0 = randomWord();
    const s1 = randomWord();
    if (parent instanceof RecordedSpan) {
      const ids = parent.ids;
      this.ids = [
        ids[0] as number,
        ids[1] as number,
        ids[2] as number,
        ids[3] as number,
        s0,
        s1,
        ids[4] as number,
        ids[5] as number,
      ];
    } else if (parent !== undefined) {
      this.ids = [...wordsOf(parent.traceId), s0, s1, ...wordsOf(parent.spanId)];
    } else {
      this.ids = [randomWord(), randomWord(), randomWord(), randomWord(), s0, s1, 0, 0];
    }
    this.parentIsRemote = parent !== undefined && !(parent instanceof RecordedSpan) && parent.isRemote === true;
  }

  spanContext(): SpanContext {
    if (this.#context === undefined) {
      const [t0, t1, t2, t3, s0, s1] = this.ids as [number, number, number, number, number, number];
      this.#context = {
        traceId: hexWord(t0) + hexWord(t1) + hexWord(t2) + hexWord(t3),
        spanId: hexWord(s0) + hexWord(s1),
        traceFlags: TraceFlags.SAMPLED,
      };
    }
    return this.#context;
  }
  setAttribute(key: string, value: AttributeValue): this {
    if (this.isRecording()) this.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: Attributes): this {
    if (this.isRecording()) Object.assign(this.attributes, attributes);
    return this;
  }
  addEvent(name: string, attributes?: Attributes | TimeInput): this {
    if (!this.isRecording()) return this;
    const own = typeof attributes === 'object' && !Array.isArray(attributes) && !(attributes instanceof Date);
    const event = { name, attributes: own ? attributes : undefined, time: performance.now() };
    if (this.events === undefined) this.events = [event];
    else this.events.push(event);
    return this;
  }
  addLink(_link: Link): this {
    return this;
  }
  addLinks(_links: Link[]): this {
    return this;
  }
  setStatus(status: SpanStatus): this {
    if (this.isRecording()) this.status = status;
    return this;
  }
  updateName(name: string): this {
    this.name = name;
    return this;
  }
  end(): void {
    if (!this.isRecording()) return;
    this.endedAt = performance.now();
    this.sink(this);
  }
  isRecording(): boolean {
    return Number.isNaN(this.endedAt);
  }
  recordException(exception: Exception): void {
    const error = typeof exception === 'string' ? { message: exception } : exception;
    this.addEvent('exception', {
      'exception.type': error.name ?? 'Error',
      'exception.message': error.message ?? '',
      ...(error.stack ? { 'exception.stacktrace': error.stack } : {}),
    });
  }
}
