// The export thread's two encoders of packed spans (span-json.ts, span-proto.ts) as one source,
// which the thread evaluates; `spanWriters()` evaluates it in this thread, for the tests and the
// encoding benchmark (bench/span-encoding.ts).
import type { SpanBatchData } from './span-batch.js';
import { SPAN_JSON_SOURCE } from './span-json.js';
import { SPAN_PROTO_SOURCE } from './span-proto.js';

export const SPAN_WRITERS_SOURCE = `${SPAN_JSON_SOURCE}\n${SPAN_PROTO_SOURCE}`;

/** A writer of export requests: `add` writes a batch's spans while `hasRoom()`, calling `written()` after each. */
export interface SpanWriter {
  readonly count: number;
  add(data: SpanBatchData, hasRoom: () => boolean, written: () => void): void;
  take(): { body: Buffer; count: number } | undefined;
}

export interface SpanWriters {
  createSpanWriter(timeOrigin: number, head: string, tail: string): SpanWriter;
  createSpanProtoWriter(timeOrigin: number, resource: Buffer, schemaUrl: string, scopeName: string): SpanWriter;
  resourceFields(attributes: Record<string, unknown>): Buffer;
}

/** The encoders, evaluated in this thread as the export thread evaluates them. */
export const spanWriters = (): SpanWriters =>
  new Function('Buffer', `${SPAN_WRITERS_SOURCE}\nreturn { createSpanWriter, createSpanProtoWriter, resourceFields };`)(
    Buffer,
  );
