// A message turn as a stream of typed events (docs/agent.md, Streaming): `POST /api/v1/messages`
// and `POST /api/v1/messages/{id}/continue` with `Accept: text/event-stream`.
//
//   for await (const e of ws.streamMessage({ content: 'Where is my order?' })) {
//     if (e.event === 'message.delta') process.stdout.write(e.data.delta);
//     if (e.event === 'done') console.log(e.data.status, e.data.message.id);
//   }
//
// A refusal before the stream opens (429 `turn_limit_exceeded`, 404, 409, 422) throws the API's
// `WorkspaceApiError`; a stream that breaks or ends before `done` throws `WorkspaceStreamError`;
// the caller's AbortSignal (or leaving the loop) closes the connection. The turn itself runs on at
// the server whatever happens to the stream.
import { WorkspaceAbortError, WorkspaceApiError, WorkspaceStreamError, WorkspaceTimeoutError } from './errors.js';
import type { paths } from './schema.js';
import { readSseFrames } from './sse.js';
import type { SendOptions } from './transport.js';

/** An agent message, as `POST /api/v1/messages` answers it. */
export type Message = paths['/api/v1/messages']['post']['responses'][200]['content']['application/json'];
export type SendMessageBody = paths['/api/v1/messages']['post']['requestBody']['content']['application/json'];
export type ContinueMessageBody = NonNullable<
  paths['/api/v1/messages/{message_id}/continue']['post']['requestBody']
>['content']['application/json'];
type FunctionCall = Message['function_calls'][number];

/** Carried by every event's `data`. */
export interface TurnIds {
  message_id: string;
  conversation_id: string;
}

/** The events of a turn, by `event` (the SSE event name); `data` typed from the OpenAPI document's Message. */
export type TurnEvent =
  | { event: 'message.created'; data: TurnIds & { role: Message['role']; in_reply_to: string | null } }
  | { event: 'message.delta'; data: TurnIds & { delta: string } }
  | { event: 'citation'; data: TurnIds & { citation: Message['citations'][number] } }
  | { event: 'function_call'; data: TurnIds & Pick<FunctionCall, 'call_id' | 'name' | 'arguments' | 'type'> }
  | { event: 'function_result'; data: TurnIds & Pick<FunctionCall, 'call_id' | 'name' | 'status' | 'output'> }
  | { event: 'handoff'; data: TurnIds & NonNullable<Message['handoff']> }
  | {
      event: 'done';
      data: TurnIds & {
        status: 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED';
        /** When FAILED. */
        error?: NonNullable<Message['error']>;
        /** The agent message, as `GET /api/v1/messages/{id}` answers it. */
        message: Message;
      };
    }
  /** The turn ended but its result could not be stored; the stream ends without `done`. */
  | { event: 'error'; data: TurnIds & { message: string } };

export type TurnEventName = TurnEvent['event'];
export type TurnEventOf<N extends TurnEventName> = Extract<TurnEvent, { event: N }>;

const EVENT_NAMES: ReadonlySet<string> = new Set<TurnEventName>([
  'message.created',
  'message.delta',
  'citation',
  'function_call',
  'function_result',
  'handoff',
  'done',
  'error',
]);

export interface StreamOptions extends SendOptions {
  /** Sent as `Idempotency-Key` (by default the client makes one when the request may be retried). */
  idempotencyKey?: string;
  /** Extra headers of this request. */
  headers?: Record<string, string>;
}

/** How a turn's request is sent: the client's transport (retries, timeouts, its headers). */
export type StreamSender = (request: Request, options: SendOptions) => Promise<Response>;

/**
 * A turn's events, read once: iterate it with `for await`. The request is sent when iteration
 * starts. `finalMessage()` reads it to its end and answers the `done` event's message.
 */
export class TurnStream implements AsyncIterable<TurnEvent> {
  #started = false;
  /** The answer's `x-request-id`, once the stream has opened. */
  requestId: string | undefined;

  constructor(
    private readonly send: StreamSender,
    private readonly request: Request,
    private readonly options: StreamOptions,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<TurnEvent> {
    if (this.#started) throw new TypeError('TurnStream: a turn stream can be read only once');
    this.#started = true;
    return this.#events();
  }

  /** Reads the stream to its end; the `done` event's message (a FAILED turn's too). */
  async finalMessage(): Promise<Message> {
    for await (const event of this) if (event.event === 'done') return event.data.message;
    // #events ends only after `done` or by throwing.
    throw new TypeError('TurnStream: ended without done');
  }

  async *#events(): AsyncGenerator<TurnEvent, void, undefined> {
    const response = await this.send(this.request, this.options);
    this.requestId = response.headers.get('x-request-id') ?? undefined;
    if (!response.ok) throw await WorkspaceApiError.fromResponse(response);
    const type = response.headers.get('content-type') ?? '';
    if (!/^text\/event-stream/i.test(type)) {
      // Answered as JSON all the same (a proxy that asks for it): the message is the turn's end.
      const message = (await response.json()) as Message;
      const ids = { message_id: message.id, conversation_id: message.conversation_id };
      const status = message.status as 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED';
      yield { event: 'done', data: { ...ids, status, ...(message.error ? { error: message.error } : {}), message } };
      return;
    }
    yield* readTurnEvents(response);
  }
}

/** The typed events of an open stream, through `done`; throws `WorkspaceStreamError` without it. */
export async function* readTurnEvents(response: Response): AsyncGenerator<TurnEvent, void, undefined> {
  const body = response.body;
  let ids: Partial<TurnIds> = {};
  let failure: string | undefined;
  const broken = (code: 'stream_incomplete' | 'stream_error', message: string, cause?: unknown) =>
    new WorkspaceStreamError(response.status, code, message, {
      messageId: ids.message_id,
      conversationId: ids.conversation_id,
      headers: response.headers,
      cause,
    });
  if (!body) throw broken('stream_incomplete', 'The stream had no body');
  const reader = body.getReader();
  try {
    for await (const frame of readSseFrames(chunksOf(reader))) {
      if (!EVENT_NAMES.has(frame.event)) continue; // an event this client does not know yet
      let data: TurnEvent['data'];
      try {
        data = JSON.parse(frame.data);
      } catch (error) {
        throw broken('stream_incomplete', `The ${frame.event} event's data is not JSON`, error);
      }
      ids = { message_id: data.message_id, conversation_id: data.conversation_id };
      const event = { event: frame.event, data } as TurnEvent;
      if (event.event === 'error') failure = event.data.message;
      yield event;
      if (event.event === 'done') return;
    }
  } catch (error) {
    // The caller's signal and the idle timeout keep their own errors; anything else broke the stream.
    if (error instanceof WorkspaceAbortError || error instanceof WorkspaceTimeoutError) throw error;
    if (error instanceof WorkspaceStreamError) throw error;
    throw broken('stream_incomplete', 'The stream broke before the turn ended', error);
  } finally {
    // Leaving the loop early (break, return, an error) closes the connection.
    await reader.cancel().catch(() => undefined);
  }
  throw failure !== undefined
    ? broken('stream_error', failure)
    : broken('stream_incomplete', 'The stream ended before the turn ended (no done event)');
}

async function* chunksOf(reader: ReadableStreamDefaultReader<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    yield value;
  }
}
