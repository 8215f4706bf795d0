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

/** Random bytes drawn 4 KiB at a time, for ids (16 bytes a trace, 8 a span). */
const pool = Buffer.allocUnsafe(4096);
let used = pool.length;

function randomHex(bytes: number): string {
  if (used + bytes > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const hex = pool.toString('hex', used, used + bytes);
  used += bytes;
  return hex;
}

export interface SpanEvent {
  name: string;
  attributes: Attributes | undefined;
  /** performance.now() milliseconds. */
  time: number;
}

/** Called with each span that ends. */
export type SpanSink = (span: RecordedSpan) => void;

export class RecordedSpan implements Span {
  readonly context: SpanContext;
  readonly parentSpanId: string | undefined;
  /** The parent came from another process (a caller's `traceparent`). */
  readonly parentIsRemote: boolean;
  /** performance.now() milliseconds; `endedAt` is NaN until the span ends. */
  readonly start = performance.now();
  endedAt = Number.NaN;
  status: SpanStatus = { code: SpanStatusCode.UNSET };
  events: SpanEvent[] | undefined;

  constructor(
    private readonly sink: SpanSink,
    public name: string,
    readonly kind: SpanKind,
    readonly attributes: Attributes,
    parent: SpanContext | undefined,
  ) {
    this.parentSpanId = parent?.spanId;
    this.parentIsRemote = parent?.isRemote === true;
    this.context = {
      traceId: parent?.traceId ?? randomHex(16),
      spanId: randomHex(8),
      traceFlags: TraceFlags.SAMPLED,
    };
  }

  spanContext(): SpanContext {
    return this.context;
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
