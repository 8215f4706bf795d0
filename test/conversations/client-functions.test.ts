// Client functions over a real HTTP listener, streams read with a real SSE parser
// (eventsource-parser): the pause flow (two calls in one turn, continue refused until every
// result is in, a server restart between pause and continue, abandonment by a new message), the
// default mode (results awaited on the open stream), a client that disconnects mid-stream, and a
// result racing a continue (PostgreSQL only).
import type { AddressInfo } from 'node:net';
import { createParser } from 'eventsource-parser';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../../src/app.js';
import { lockWaiters, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;
let server: App | undefined;
let base = '';

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await server?.app.close();
  await t.close();
});

/** A second app on the same database, listening on a real port: what a restarted server is. */
async function startServer(): Promise<void> {
  server = await buildApp({ config: t.config, db: t.database.db });
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
}

async function stopServer(): Promise<void> {
  await server?.app.close();
  server = undefined;
}

interface StreamEvent {
  event: string;
  // biome-ignore lint/suspicious/noExplicitAny: event payloads are read loosely.
  data: any;
}

// biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies loosely.
type Json = any;

async function request(key: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: await response.json() };
}

/** POSTs and reads the answer as an SSE stream; `onEvent` may act while the stream is open. */
async function stream(
  key: string,
  path: string,
  body: unknown,
  onEvent: (event: StreamEvent, stop: () => void) => void = () => undefined,
) {
  const controller = new AbortController();
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const events: StreamEvent[] = [];
  if (!String(response.headers.get('content-type')).startsWith('text/event-stream')) {
    return { status: response.status, headers: response.headers, events, json: (await response.json()) as Json };
  }
  let stopped = false;
  const stop = () => {
    stopped = true;
    controller.abort();
  };
  const parser = createParser({
    onEvent: (message) => {
      const event = { event: message.event ?? 'message', data: JSON.parse(message.data) };
      events.push(event);
      onEvent(event, stop);
    },
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (stopped) break;
    }
  } catch (error) {
    if (!stopped) throw error;
  }
  return { status: response.status, headers: response.headers, events, json: undefined as Json };
}

const WEATHER = {
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TIME = {
  name: 'get_time',
  description: 'Local time in a zone',
  parameters: { type: 'object', properties: { zone: { type: 'string' } } },
};

/** A turn paused on one `get_time` call whose result (`"noon"`) is in: ready to continue. */
async function pausedWithResult(key: string, extra: Record<string, unknown> = {}) {
  const paused = await request(key, '/api/v1/messages', {
    content: 'get_time',
    client_functions: [TIME],
    client_functions_mode: 'pause',
    ...extra,
  });
  await request(key, `/api/v1/messages/${paused.body.id}/function-results`, {
    results: [{ call_id: paused.body.function_calls[0].call_id, output: 'noon' }],
  });
  return paused;
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 8000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('streaming a turn', () => {
  it('streams message.created, deltas and a final done event, every one carrying message_id and conversation_id', async () => {
    await startServer();
    const { key } = await t.tenant();
    const result = await stream(key, '/api/v1/messages', { content: 'Hello, anyone there?' });
    expect(result.status).toBe(200);
    expect(result.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const types = result.events.map((e) => e.event);
    expect(types[0]).toBe('message.created');
    expect(types.at(-1)).toBe('done');
    expect(types.filter((x) => x === 'message.delta').length).toBeGreaterThan(1);
    const done = result.events.at(-1)?.data;
    expect(done.status).toBe('COMPLETED');
    for (const event of result.events) {
      expect(event.data.message_id).toBe(done.message.id);
      expect(event.data.conversation_id).toBe(done.message.conversation_id);
    }
    const text = result.events
      .filter((e) => e.event === 'message.delta')
      .map((e) => e.data.delta)
      .join('');
    expect(text).toBe(done.message.content);
    const stored = await request(key, `/api/v1/messages/${done.message.id}`);
    expect(stored.body).toMatchObject({ status: 'COMPLETED', content: text });
    await stopServer();
  });

  it('answers request errors as JSON before any stream starts', async () => {
    await startServer();
    const { key } = await t.tenant();
    const result = await stream(key, '/api/v1/messages', { content: 'x', hidden: true });
    expect(result.status).toBe(422);
    expect(result.json.error).toMatchObject({ code: 'missing_required_parameter', param: 'conversation_id' });
    await stopServer();
  });
});

describe('pause mode', () => {
  it('pauses with two calls, refuses continue until both results are in, survives a restart, then resumes', async () => {
    await startServer();
    const { tenantId, key } = await t.tenant();
    const paused = await stream(key, '/api/v1/messages', {
      content: 'Please get_weather city=Paris and get time zone=CET',
      client_functions: [WEATHER, TIME],
      client_functions_mode: 'pause',
      context: { page: '/home' },
    });
    expect(paused.status).toBe(200);
    const calls = paused.events.filter((e) => e.event === 'function_call').map((e) => e.data);
    expect(calls.map((c) => [c.name, c.arguments, c.type])).toEqual([
      ['get_weather', { city: 'Paris' }, 'client'],
      ['get_time', { zone: 'CET' }, 'client'],
    ]);
    const done = paused.events.at(-1);
    expect(done?.event).toBe('done');
    expect(done?.data.status).toBe('WAITING_CLIENT');
    const messageId = done?.data.message_id as string;
    const [weather, time] = calls.map((c) => c.call_id as string);
    for (const event of paused.events) expect(event.data.message_id).toBe(messageId);

    // Paused: the conversation is free, the state is stored.
    const conversation = await request(key, `/api/v1/conversations/${done?.data.conversation_id}`);
    expect(conversation.body.turn_in_progress).toBe(false);

    const early = await request(key, `/api/v1/messages/${messageId}/continue`, {});
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('conflict');
    const unknown = await request(key, `/api/v1/messages/${messageId}/function-results`, {
      results: [{ call_id: 'call_unknown', output: 1 }],
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error).toMatchObject({ code: 'invalid_parameters', param: 'results[0].call_id' });
    const first = await request(key, `/api/v1/messages/${messageId}/function-results`, {
      results: [{ call_id: weather, output: { sky: 'clear', celsius: 18 } }],
    });
    expect(first.body).toMatchObject({ received_call_ids: [weather], pending_call_ids: [time], ready: false });
    const still = await request(key, `/api/v1/messages/${messageId}/continue`, {});
    expect(still.status).toBe(409);
    expect(still.body.error.message).toContain(time);

    // A restart: a new server process, nothing kept in memory.
    await stopServer();
    await startServer();

    const second = await request(key, `/api/v1/messages/${messageId}/function-results`, {
      results: [{ call_id: time, output: '14:05' }],
    });
    expect(second.body).toMatchObject({ pending_call_ids: [], ready: true });
    const NEW_FUNCTION = { name: 'open_cart', parameters: { type: 'object' } };
    const resumed = await stream(key, `/api/v1/messages/${messageId}/continue`, {
      client_functions: [WEATHER, TIME, NEW_FUNCTION],
      context: { page: '/checkout' },
    });
    expect(resumed.status).toBe(200);
    const results = resumed.events.filter((e) => e.event === 'function_result').map((e) => e.data);
    expect(results.map((r) => [r.call_id, r.output])).toEqual([
      [weather, { sky: 'clear', celsius: 18 }],
      [time, '14:05'],
    ]);
    const end = resumed.events.at(-1);
    expect(end?.event).toBe('done');
    expect(end?.data.status).toBe('COMPLETED');
    expect(end?.data.message_id).toBe(messageId);
    expect(end?.data.message.content).toBe(
      'get_weather returned {"sky":"clear","celsius":18}.\nget_time returned "14:05".',
    );
    // The turn went on with the functions and context sent with the continue request.
    const turn = await t.database.db
      .selectFrom('agent_turns')
      .select(['client_functions', 'context'])
      .where('tenant_id', '=', tenantId)
      .where('message_id', '=', messageId)
      .executeTakeFirstOrThrow();
    expect(turn.client_functions).toEqual([WEATHER, TIME, NEW_FUNCTION]);
    expect(turn.context).toEqual({ page: '/checkout' });
    // The continue's context replaces the conversation's, as a message's does.
    const after = await request(key, `/api/v1/conversations/${done?.data.conversation_id}`);
    expect(after.body.context).toEqual({ page: '/checkout' });

    const again = await request(key, `/api/v1/messages/${messageId}/continue`, {});
    expect(again.status).toBe(409);
    await stopServer();
  });

  it('a new message abandons the paused turn: continue and function results then answer 409', async () => {
    await startServer();
    const { key } = await t.tenant();
    const paused = await request(key, '/api/v1/messages', {
      content: 'get_weather city=Rome',
      client_functions: [WEATHER],
      client_functions_mode: 'pause',
    });
    expect(paused.body.status).toBe('WAITING_CLIENT');
    const callId = paused.body.function_calls[0].call_id;
    const next = await request(key, '/api/v1/messages', {
      content: 'never mind',
      conversation_id: paused.body.conversation_id,
    });
    expect(next.status).toBe(200);
    const old = await request(key, `/api/v1/messages/${paused.body.id}`);
    expect(old.body.status).toBe('ABANDONED');
    const results = await request(key, `/api/v1/messages/${paused.body.id}/function-results`, {
      results: [{ call_id: callId, output: 'rain' }],
    });
    expect(results.status).toBe(409);
    const resumed = await request(key, `/api/v1/messages/${paused.body.id}/continue`, {});
    expect(resumed.status).toBe(409);
    expect(resumed.body.error.message).toMatch(/abandoned/);
    await stopServer();
  });

  it('a continue whose context the database refuses changes nothing: the turn stays paused and resumes later', async () => {
    await startServer();
    const { key } = await t.tenant();
    const paused = await pausedWithResult(key, { context: { page: '/a' } });
    const refused = await request(key, `/api/v1/messages/${paused.body.id}/continue`, { context: { a: 'b\u0000' } });
    expect(refused.status).toBe(422);
    expect((await request(key, `/api/v1/messages/${paused.body.id}`)).body.status).toBe('WAITING_CLIENT');
    const conversation = await request(key, `/api/v1/conversations/${paused.body.conversation_id}`);
    expect(conversation.body).toMatchObject({ context: { page: '/a' }, turn_in_progress: false });
    const resumed = await request(key, `/api/v1/messages/${paused.body.id}/continue`, { context: { page: '/b' } });
    expect(resumed.body).toMatchObject({ status: 'COMPLETED', content: 'get_time returned "noon".' });
    await stopServer();
  });

  it("continue streams the client's results only; a workflow's result was streamed when it ran, with its status", async () => {
    await startServer();
    const { key } = await t.tenant();
    const workflow = await request(key, '/api/v1/workflows', {
      name: 'refund_order',
      input_schema: { type: 'object', required: ['amount'] },
    });
    await t.call({ method: 'PUT', url: `/api/v1/workflows/${workflow.body.id}/enabled`, key, body: { enabled: true } });
    const paused = await stream(key, '/api/v1/messages', {
      content: 'refund_order please, and get_time',
      client_functions: [TIME],
      client_functions_mode: 'pause',
    });
    const first = paused.events.filter((e) => e.event === 'function_result').map((e) => e.data);
    expect(first.map((r) => [r.name, r.status])).toEqual([['refund_order', 'failed']]);
    const done = paused.events.at(-1)?.data;
    expect(done.status).toBe('WAITING_CLIENT');
    const time = paused.events.find((e) => e.event === 'function_call' && e.data.name === 'get_time')?.data.call_id;
    await request(key, `/api/v1/messages/${done.message_id}/function-results`, {
      results: [{ call_id: time, output: 'noon' }],
    });
    const resumed = await stream(key, `/api/v1/messages/${done.message_id}/continue`, {});
    const then = resumed.events.filter((e) => e.event === 'function_result').map((e) => e.data);
    expect(then.map((r) => [r.name, r.status, r.output])).toEqual([['get_time', 'completed', 'noon']]);
    expect(resumed.events.at(-1)?.data.status).toBe('COMPLETED');
    await stopServer();
  });

  // PostgreSQL only: a second session holds the call's row, so the new result's write waits while
  // a continue is sent.
  it.runIf(usingPostgres)(
    'a result sent while a continue is in flight is the one the turn uses, never stored unused',
    async () => {
      await startServer();
      const { key } = await t.tenant();
      const paused = await pausedWithResult(key);
      const callId = paused.body.function_calls[0].call_id;
      await t.database.db.connection().execute(async (session) => {
        await sql`begin`.execute(session);
        await sql`select 1 from function_calls where message_id = ${paused.body.id} for update`.execute(session);
        const replacing = request(key, `/api/v1/messages/${paused.body.id}/function-results`, {
          results: [{ call_id: callId, output: 'midnight' }],
        });
        expect(await lockWaiters(session, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
        let continued = false;
        const continuing = request(key, `/api/v1/messages/${paused.body.id}/continue`, {}).finally(() => {
          continued = true;
        });
        // The continue waits behind the result being written (or, were the turn not locked, runs to
        // its end with the result it had).
        const behindResult = async () => {
          const { rows } = await sql<{ n: number }>`
            select count(*)::int as n from pg_locks w where not w.granted and exists (
              select 1 from pg_locks b where not b.granted and b.pid = any(pg_blocking_pids(w.pid))
                and pg_backend_pid() = any(pg_blocking_pids(b.pid)))`.execute(session);
          return rows[0]?.n ?? 0;
        };
        await until(behindResult, (n) => n > 0 || continued);
        await sql`commit`.execute(session);
        const [replaced, resumed] = await Promise.all([replacing, continuing]);
        expect(replaced.status).toBe(200);
        expect(resumed.body).toMatchObject({
          status: 'COMPLETED',
          content: 'get_time returned "midnight".',
          function_calls: [{ call_id: callId, output: 'midnight' }],
        });
      });
      const stored = await request(key, `/api/v1/messages/${paused.body.id}`);
      expect(stored.body).toMatchObject({
        content: 'get_time returned "midnight".',
        function_calls: [{ output: 'midnight' }],
      });
      await stopServer();
    },
  );

  it('continue answers JSON without Accept: text/event-stream', async () => {
    await startServer();
    const { key } = await t.tenant();
    const paused = await pausedWithResult(key);
    const resumed = await request(key, `/api/v1/messages/${paused.body.id}/continue`, {});
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({
      id: paused.body.id,
      status: 'COMPLETED',
      content: 'get_time returned "noon".',
      function_calls: [{ name: 'get_time', status: 'completed', output: 'noon' }],
    });
    await stopServer();
  });
});

describe('default mode', () => {
  it('awaits the results on the open stream: the client posts them and the same stream goes on to done', async () => {
    await startServer();
    const { key } = await t.tenant();
    const posted: Promise<unknown>[] = [];
    const result = await stream(
      key,
      '/api/v1/messages',
      { content: 'get_weather city=Oslo', client_functions: [WEATHER] },
      (event) => {
        if (event.event === 'function_call') {
          posted.push(
            request(key, `/api/v1/messages/${event.data.message_id}/function-results`, {
              results: [{ call_id: event.data.call_id, output: 'snow' }],
            }),
          );
        }
      },
    );
    await Promise.all(posted);
    const types = result.events.map((e) => e.event);
    expect(types.indexOf('function_call')).toBeLessThan(types.indexOf('function_result'));
    const done = result.events.at(-1);
    expect(done?.event).toBe('done');
    expect(done?.data.status).toBe('COMPLETED');
    expect(done?.data.message.content).toBe('get_weather returned "snow".');
    await stopServer();
  });

  it('a client that disconnects mid-stream loses nothing: the turn finishes and is stored', async () => {
    await startServer();
    const { key } = await t.tenant();
    let callId = '';
    let messageId = '';
    const result = await stream(
      key,
      '/api/v1/messages',
      { content: 'get_weather city=Lima', client_functions: [WEATHER] },
      (event, stop) => {
        if (event.event === 'function_call') {
          callId = event.data.call_id;
          messageId = event.data.message_id;
          stop();
        }
      },
    );
    expect(result.events.some((e) => e.event === 'done')).toBe(false);
    const ack = await request(key, `/api/v1/messages/${messageId}/function-results`, {
      results: [{ call_id: callId, output: 'warm' }],
    });
    expect(ack.status).toBe(200);
    const stored = await until(
      () => request(key, `/api/v1/messages/${messageId}`),
      (r) => r.body.status === 'COMPLETED',
    );
    expect(stored.body).toMatchObject({ status: 'COMPLETED', content: 'get_weather returned "warm".' });
    await stopServer();
  });
});
