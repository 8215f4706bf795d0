// The typed client's message streams (docs/agent.md, Streaming) against a live listener: typed
// events through `done`, client functions over an open stream and a paused turn continued, the
// API's refusals (422, 404, 429 turn_limit_exceeded) as WorkspaceApiError, a broken stream as
// WorkspaceStreamError, cancelling with an AbortSignal, and the JSON methods asked for a stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createWorkspaceClient,
  type TurnEvent,
  WorkspaceAbortError,
  WorkspaceApiError,
  WorkspaceStreamError,
} from '../../client/src/index.js';
import { readSseFrames } from '../../client/src/sse.js';
import { UNKNOWN_ANSWER } from '../../src/domain/agent/builtin-provider.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { startGateway } from './gateway.js';

let t: TestApp;
let base = '';

beforeAll(async () => {
  t = await startTestApp({ CLIENT_FUNCTION_TIMEOUT_MS: '30000', TURN_MAX_STREAMS_PER_TENANT: '1' });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => t.close());

const GET_ORDER = { name: 'get_order', parameters: { type: 'object', properties: {} } };

async function collect(stream: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const events: TurnEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

async function failure(stream: AsyncIterable<TurnEvent>, seen: TurnEvent[] = []): Promise<unknown> {
  try {
    for await (const event of stream) seen.push(event);
  } catch (error) {
    return error;
  }
  throw new Error(`the stream ended without an error after ${seen.map((e) => e.event).join(', ')}`);
}

describe('streamMessage', () => {
  it('yields typed events from message.created to done, whose message is the stored record', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    const events = await collect(ws.streamMessage({ content: 'Hello there' }));

    expect(events[0]?.event).toBe('message.created');
    const last = events.at(-1);
    if (last?.event !== 'done') throw new Error('no done event');
    // Narrowed by the event name: `status` and `message` are typed.
    const status: 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED' = last.data.status;
    expect(status).toBe('COMPLETED');
    expect(last.data.message).toMatchObject({ object: 'message', role: 'assistant', content: UNKNOWN_ANSWER });
    const deltas = events.flatMap((e) => (e.event === 'message.delta' ? [e.data.delta] : []));
    expect(deltas.join('')).toBe(UNKNOWN_ANSWER);
    for (const event of events) {
      expect(event.data.message_id).toBe(last.data.message.id);
      expect(event.data.conversation_id).toBe(last.data.message.conversation_id);
    }
    const stored = await ws.get('/api/v1/messages/{message_id}', {
      params: { path: { message_id: last.data.message.id } },
    });
    expect(stored).toEqual(last.data.message);
  });

  it('a turn waiting for a client function goes on in the same stream once its result is posted', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    const names: string[] = [];
    let done: TurnEvent | undefined;
    for await (const event of ws.streamMessage({ content: 'please get_order', client_functions: [GET_ORDER] })) {
      names.push(event.event);
      if (event.event === 'function_call') {
        expect(event.data).toMatchObject({ name: 'get_order', type: 'client', arguments: {} });
        await ws.post('/api/v1/messages/{message_id}/function-results', {
          params: { path: { message_id: event.data.message_id } },
          body: { results: [{ call_id: event.data.call_id, output: { status: 'shipped' } }] },
        });
      }
      if (event.event === 'function_result') expect(event.data.output).toEqual({ status: 'shipped' });
      done = event;
    }
    expect(names).toEqual(expect.arrayContaining(['message.created', 'function_call', 'function_result', 'done']));
    expect(done).toMatchObject({ event: 'done', data: { status: 'COMPLETED' } });
  });

  it('a paused turn ends WAITING_CLIENT and streamContinue resumes it with its results', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    const paused = await ws
      .streamMessage({ content: 'please get_order', client_functions: [GET_ORDER], client_functions_mode: 'pause' })
      .finalMessage();
    expect(paused.status).toBe('WAITING_CLIENT');
    const call = paused.function_calls[0];
    if (!call) throw new Error('no function call');
    await ws.post('/api/v1/messages/{message_id}/function-results', {
      params: { path: { message_id: paused.id } },
      body: { results: [{ call_id: call.call_id, output: 'shipped' }] },
    });

    const events = await collect(ws.streamContinue(paused.id));
    expect(events[0]).toMatchObject({ event: 'function_result', data: { call_id: call.call_id, output: 'shipped' } });
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { status: 'COMPLETED', message: { id: paused.id } } });
  });
});

describe('refusals and failures', () => {
  it('a refusal before the stream opens throws the API error: 422 naming the field, 404, 409 on continue', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });

    const invalid = await failure(ws.streamMessage({ content: '' }));
    expect(invalid).toBeInstanceOf(WorkspaceApiError);
    expect(invalid).toMatchObject({ status: 422, code: 'validation_error', param: 'content' });

    const missing = await failure(
      ws.streamMessage({ content: 'Hi', conversation_id: '00000000-0000-4000-8000-000000000000' }),
    );
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });

    const done = await ws.streamMessage({ content: 'Hi' }).finalMessage();
    expect(await failure(ws.streamContinue(done.id))).toMatchObject({ status: 409, code: 'conflict' });
  });

  it('429 turn_limit_exceeded throws with retryAfter when not retried, and is waited out when retried', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    // The workspace's one streamed turn stays open, waiting for its client function's result.
    const first = ws
      .streamMessage({ content: 'please get_order', client_functions: [GET_ORDER] })
      [Symbol.asyncIterator]();
    let call: TurnEvent | undefined;
    while (call?.event !== 'function_call') call = (await first.next()).value as TurnEvent;

    const noRetries = createWorkspaceClient({ baseUrl: base, apiKey: key, maxRetries: 0 });
    const refused = await failure(noRetries.streamMessage({ content: 'Hi' }));
    expect(refused).toBeInstanceOf(WorkspaceApiError);
    expect(refused).toMatchObject({
      status: 429,
      type: 'rate_limit_error',
      code: 'turn_limit_exceeded',
      retryAfter: 5,
    });

    // Retried after Retry-After: the place frees once the first turn has its result.
    const reasons: string[] = [];
    let waiting: () => void = () => undefined;
    const refusedOnce = new Promise<void>((resolve) => {
      waiting = resolve;
    });
    const retrying = createWorkspaceClient({
      baseUrl: base,
      apiKey: key,
      onRetry: (r) => {
        reasons.push(r.reason);
        waiting();
      },
    });
    const second = collect(retrying.streamMessage({ content: 'Hi' }));
    await refusedOnce;
    await ws.post('/api/v1/messages/{message_id}/function-results', {
      params: { path: { message_id: call.data.message_id } },
      body: { results: [{ call_id: call.data.call_id, output: 'ok' }] },
    });
    for (let next = await first.next(); !next.done; next = await first.next());
    expect((await second).at(-1)).toMatchObject({ event: 'done', data: { status: 'COMPLETED' } });
    expect(reasons[0]).toBe('rate_limited');
  }, 60_000);

  it('a stream cut before done throws WorkspaceStreamError naming the turn, which runs on at the server', async () => {
    const { key } = await t.tenant();
    const gateway = await startGateway(base);
    try {
      const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key });
      gateway.fail({ cutAfterFrames: 1 });
      const seen: TurnEvent[] = [];
      const error = await failure(ws.streamMessage({ content: 'Hello' }), seen);
      expect(error).toBeInstanceOf(WorkspaceStreamError);
      expect(error).toBeInstanceOf(WorkspaceApiError);
      expect(seen.map((e) => e.event)).toEqual(['message.created']);
      const broken = error as WorkspaceStreamError;
      expect(broken).toMatchObject({ code: 'stream_incomplete', messageId: seen[0]?.data.message_id });
      expect(broken.requestId).toBeTruthy();

      const direct = createWorkspaceClient({ baseUrl: base, apiKey: key });
      const path = { message_id: broken.messageId ?? '' };
      let stored = await direct.get('/api/v1/messages/{message_id}', { params: { path } });
      for (let i = 0; i < 100 && stored.status === 'IN_PROGRESS'; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        stored = await direct.get('/api/v1/messages/{message_id}', { params: { path } });
      }
      expect(stored.status).toBe('COMPLETED');
    } finally {
      await gateway.close();
    }
  });

  it('an AbortSignal cancels a stream that is waiting: WorkspaceAbortError, the connection closed', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    const controller = new AbortController();
    const seen: TurnEvent[] = [];
    const stream = ws.streamMessage(
      { content: 'please get_order', client_functions: [GET_ORDER] },
      { signal: controller.signal },
    );
    const error = await failure(
      (async function* () {
        for await (const event of stream) {
          yield event;
          // The turn now waits up to CLIENT_FUNCTION_TIMEOUT_MS (30 s) for a result that never comes.
          if (event.event === 'function_call') controller.abort(new Error('user left'));
        }
      })(),
      seen,
    );
    expect(error).toBeInstanceOf(WorkspaceAbortError);
    expect(error).toMatchObject({ code: 'aborted', status: 0 });
    expect((error as Error).cause).toEqual(new Error('user left'));
    expect(seen.at(-1)?.event).toBe('function_call');
    // A signal already aborted sends nothing.
    expect(await failure(ws.streamMessage({ content: 'Hi' }, { signal: controller.signal }))).toBeInstanceOf(
      WorkspaceAbortError,
    );
  });
  it('leaving the loop early closes the connection; the turn runs on', async () => {
    const { key } = await t.tenant();
    const gateway = await startGateway(base);
    try {
      const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key });
      let messageId = '';
      for await (const event of ws.streamMessage({ content: 'please get_order', client_functions: [GET_ORDER] })) {
        messageId = event.data.message_id;
        // The turn now waits up to CLIENT_FUNCTION_TIMEOUT_MS (30 s): only the client can close it sooner.
        if (event.event === 'function_call') break;
      }
      for (let i = 0; i < 200 && gateway.openConnections() > 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(gateway.openConnections()).toBe(0);
      const stored = await ws.get('/api/v1/messages/{message_id}', { params: { path: { message_id: messageId } } });
      expect(stored.status).toBe('WAITING_CLIENT');
    } finally {
      await gateway.close();
    }
  });
});

describe('the JSON methods asked for a stream', () => {
  it('post with Accept: text/event-stream reads the stream and answers the done event’s message', async () => {
    const { key } = await t.tenant();
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    const message = await ws.post('/api/v1/messages', {
      body: { content: 'Hello' },
      headers: { Accept: 'text/event-stream' },
    });
    expect(message).toMatchObject({ object: 'message', status: 'COMPLETED', content: UNKNOWN_ANSWER });
  });
});

describe('event stream framing', () => {
  async function frames(text: string, cuts: number[]) {
    const bytes = new TextEncoder().encode(text);
    const edges = [0, ...cuts, bytes.length];
    const chunks = (async function* () {
      for (let i = 0; i + 1 < edges.length; i++) yield bytes.slice(edges[i], edges[i + 1]);
    })();
    const out: { event: string; data: string }[] = [];
    for await (const frame of readSseFrames(chunks)) out.push(frame);
    return out;
  }

  it('reads LF, CRLF and CR line ends, even cut between CR and LF or inside a character', async () => {
    const text =
      ': keep-alive\r\n\r\nevent: message.delta\r\ndata: {"delta":"h\u00e9"}\r\n\r\n' +
      'event:done\rdata: {"a":1}\r\rdata: one\ndata:two\n\nevent: cut\ndata: never ended\n';
    const expected = [
      { event: 'message.delta', data: '{"delta":"hé"}' },
      { event: 'done', data: '{"a":1}' },
      { event: 'message', data: 'one\ntwo' },
    ];
    expect(await frames(text, [])).toEqual(expected);
    const length = new TextEncoder().encode(text).length;
    for (let cut = 1; cut < length; cut++) expect(await frames(text, [cut])).toEqual(expected);
  });
});
