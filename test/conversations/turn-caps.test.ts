// Per-tenant caps on message turns (docs/agent.md, Per-workspace caps): streamed turns one server
// runs for a workspace (TURN_MAX_STREAMS_PER_TENANT) and turns it holds waiting for client function
// results (TURN_MAX_WAITING_PER_TENANT). A request over a cap answers 429 `turn_limit_exceeded`
// with Retry-After and stores nothing; another workspace is served; a turn that ends frees its place.
import type { AddressInfo } from 'node:net';
import { createParser } from 'eventsource-parser';
import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../../src/app.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

// biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies loosely.
type Json = any;

const GET_ORDER = { name: 'get_order', parameters: { type: 'object', properties: {} } };
/** The built-in provider calls a lent function whose name the message holds. */
const CALLS_GET_ORDER = { content: 'please get_order', client_functions: [GET_ORDER] };

function baseOf(app: App['app']): string {
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** A streamed POST, read until `until` says so (or the stream ends); the stream stays open. */
async function openStream(base: string, key: string, path: string, body: unknown, until: (event: string) => boolean) {
  const controller = new AbortController();
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const events: { event: string; data: Json }[] = [];
  if (!String(response.headers.get('content-type')).startsWith('text/event-stream')) {
    return { response, events, json: (await response.json()) as Json, rest: Promise.resolve(events) };
  }
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let reached: () => void = () => undefined;
  const seen = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const parser = createParser({
    onEvent: (message) => {
      events.push({ event: message.event ?? 'message', data: JSON.parse(message.data) });
      if (until(message.event ?? '')) reached();
    },
  });
  const rest = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
    reached();
    return events;
  })();
  await seen;
  return { response, events, json: undefined as Json, rest };
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 8000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function conversationCount(t: TestApp, key: string): Promise<number> {
  const listed = await t.call({ url: '/api/v1/conversations?limit=100', key });
  return listed.body.data.length;
}

describe('streamed turns per workspace', () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await startTestApp({ TURN_MAX_STREAMS_PER_TENANT: '1', CLIENT_FUNCTION_TIMEOUT_MS: '30000' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = baseOf(t.app);
  });
  afterAll(() => t.close());

  it('a streamed turn over the cap answers 429 turn_limit_exceeded with Retry-After while another workspace streams; one that ends frees its place', async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    // A paused turn of A's with its result in, to continue later.
    const paused = await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key: a.key,
      body: { ...CALLS_GET_ORDER, client_functions_mode: 'pause' },
    });
    expect(paused.body.status).toBe('WAITING_CLIENT');
    await t.call({
      method: 'POST',
      url: `/api/v1/messages/${paused.body.id}/function-results`,
      key: a.key,
      body: { results: [{ call_id: paused.body.function_calls[0].call_id, output: 'shipped' }] },
    });

    // A's only stream stays open: its turn waits for a client result.
    const held = await openStream(base, a.key, '/api/v1/messages', CALLS_GET_ORDER, (e) => e === 'function_call');
    expect(held.response.status).toBe(200);
    const call = held.events.find((e) => e.event === 'function_call')?.data;
    const before = await conversationCount(t, a.key);

    const refused = await openStream(base, a.key, '/api/v1/messages', { content: 'hello' }, () => true);
    expect(refused.response.status).toBe(429);
    expect(refused.response.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(refused.json.error).toMatchObject({ type: 'rate_limit_error', code: 'turn_limit_exceeded' });
    // A streamed continue takes a place too; the refusal leaves the turn paused.
    const continued = await openStream(base, a.key, `/api/v1/messages/${paused.body.id}/continue`, {}, () => true);
    expect(continued.response.status).toBe(429);
    expect(continued.json.error.code).toBe('turn_limit_exceeded');
    expect((await t.call({ url: `/api/v1/messages/${paused.body.id}`, key: a.key })).body.status).toBe(
      'WAITING_CLIENT',
    );
    expect(await conversationCount(t, a.key)).toBe(before);

    // Not streamed: not counted.
    const json = await t.call({ method: 'POST', url: '/api/v1/messages', key: a.key, body: { content: 'hello' } });
    expect(json.status).toBe(200);
    // Another workspace streams.
    const other = await openStream(base, b.key, '/api/v1/messages', { content: 'hello' }, (e) => e === 'done');
    expect(other.response.status).toBe(200);
    expect(other.events.at(-1)?.data.status).toBe('COMPLETED');

    // A's turn gets its result and ends: its place is free again.
    await t.call({
      method: 'POST',
      url: `/api/v1/messages/${call.message_id}/function-results`,
      key: a.key,
      body: { results: [{ call_id: call.call_id, output: 'shipped' }] },
    });
    const ended = await held.rest;
    expect(ended.at(-1)?.data.status).toBe('COMPLETED');
    const again = await openStream(base, a.key, `/api/v1/messages/${paused.body.id}/continue`, {}, (e) => e === 'done');
    expect(again.response.status).toBe(200);
    expect((await again.rest).at(-1)?.data.status).toBe('COMPLETED');
  });
});

describe('turns waiting for client results per workspace', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ TURN_MAX_WAITING_PER_TENANT: '1', CLIENT_FUNCTION_TIMEOUT_MS: '30000' });
  });
  afterAll(() => t.close());

  const send = (key: string, body: unknown) => t.call({ method: 'POST', url: '/api/v1/messages', key, body });
  const message = (key: string, id: string) => t.call({ url: `/api/v1/messages/${id}`, key });

  it('a turn lending client functions over the cap answers 429 turn_limit_exceeded with Retry-After while another workspace waits; one that ends frees its place', async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const waiting = await send(a.key, CALLS_GET_ORDER);
    expect(waiting.body.status).toBe('WAITING_CLIENT');
    const before = await conversationCount(t, a.key);

    const refused = await send(a.key, CALLS_GET_ORDER);
    expectError(refused, 429, 'turn_limit_exceeded');
    expect(refused.body.error.type).toBe('rate_limit_error');
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(await conversationCount(t, a.key)).toBe(before);

    // Turns that cannot wait in the server are served: none lent, or lent in pause mode.
    expect((await send(a.key, { content: 'hello' })).body.status).toBe('COMPLETED');
    expect((await send(a.key, { ...CALLS_GET_ORDER, client_functions_mode: 'pause' })).body.status).toBe(
      'WAITING_CLIENT',
    );
    // Another workspace's turn waits.
    expect((await send(b.key, CALLS_GET_ORDER)).body.status).toBe('WAITING_CLIENT');

    await t.call({
      method: 'POST',
      url: `/api/v1/messages/${waiting.body.id}/function-results`,
      key: a.key,
      body: { results: [{ call_id: waiting.body.function_calls[0].call_id, output: 'shipped' }] },
    });
    const ended = await until(
      () => message(a.key, waiting.body.id),
      (r) => r.body.status !== 'WAITING_CLIENT' && r.body.status !== 'IN_PROGRESS',
    );
    expect(ended.body.status).toBe('COMPLETED');
    expect((await send(a.key, CALLS_GET_ORDER)).body.status).toBe('WAITING_CLIENT');
  });

  it('turns sent together never wait past the cap: those that come to wait over it end FAILED turn_limit_exceeded', async () => {
    const a = await t.tenant();
    const answers = await Promise.all([0, 1, 2, 3].map(() => send(a.key, CALLS_GET_ORDER)));
    const waiting = answers.filter((r) => r.status === 200 && r.body.status === 'WAITING_CLIENT');
    expect(waiting).toHaveLength(1);
    for (const r of answers.filter((r) => !waiting.includes(r))) {
      if (r.status === 429) expect(r.body.error.code).toBe('turn_limit_exceeded');
      else expect(r.body).toMatchObject({ status: 'FAILED', error: { code: 'turn_limit_exceeded' } });
    }
  });
});

describe('a turn that times out', () => {
  it('frees its place among the waiting turns', async () => {
    const t = await startTestApp({ TURN_MAX_WAITING_PER_TENANT: '1', CLIENT_FUNCTION_TIMEOUT_MS: '300' });
    try {
      const a = await t.tenant();
      const send = () => t.call({ method: 'POST', url: '/api/v1/messages', key: a.key, body: CALLS_GET_ORDER });
      const first = await send();
      expect(first.body.status).toBe('WAITING_CLIENT');
      expectError(await send(), 429, 'turn_limit_exceeded');
      const ended = await until(
        () => t.call({ url: `/api/v1/messages/${first.body.id}`, key: a.key }),
        (r) => r.body.status === 'FAILED',
      );
      expect(ended.body.error.code).toBe('client_timeout');
      expect((await send()).body.status).toBe('WAITING_CLIENT');
    } finally {
      await t.close();
    }
  });
});

describe('waiting turns and other servers', () => {
  let t: TestApp;
  let other: App;
  let queriesOfCalls = 0;
  // Counts the statements that read function_calls.
  const counting: KyselyPlugin = {
    transformQuery(args) {
      if (JSON.stringify(args.node).includes('"function_calls"')) queriesOfCalls++;
      return args.node;
    },
    transformResult: async (args) => args.result,
  };

  beforeAll(async () => {
    t = await startTestApp(
      { TURN_MAX_WAITING_PER_TENANT: '50', CLIENT_FUNCTION_TIMEOUT_MS: '30000' },
      { wrapDb: (db) => db.withPlugin(counting) },
    );
    // Another server on the same database (its own places).
    other = await buildApp({ config: t.config, db: t.database.db });
    await other.app.ready();
  });
  afterAll(async () => {
    await other.app.close();
    await t.close();
  });

  it('places are counted per server: a turn waiting on one server takes none on another', async () => {
    const capped = await buildApp({
      config: { ...t.config, turnMaxWaitingPerTenant: 1 },
      db: t.database.db,
    });
    try {
      const a = await t.tenant();
      const first = await capped.app.inject({
        method: 'POST',
        url: '/api/v1/messages',
        headers: { 'x-api-key': a.key },
        payload: CALLS_GET_ORDER,
      });
      expect(first.json().status).toBe('WAITING_CLIENT');
      const elsewhere = await t.call({ method: 'POST', url: '/api/v1/messages', key: a.key, body: CALLS_GET_ORDER });
      expect(elsewhere.body.status).toBe('WAITING_CLIENT');
    } finally {
      await capped.app.close();
    }
  });

  it('a waiting turn goes on when its results are sent to another server', async () => {
    const a = await t.tenant();
    const waiting = await t.call({ method: 'POST', url: '/api/v1/messages', key: a.key, body: CALLS_GET_ORDER });
    expect(waiting.body.status).toBe('WAITING_CLIENT');
    const sent = await other.app.inject({
      method: 'POST',
      url: `/api/v1/messages/${waiting.body.id}/function-results`,
      headers: { 'x-api-key': a.key },
      payload: { results: [{ call_id: waiting.body.function_calls[0].call_id, output: 'shipped' }] },
    });
    expect(sent.statusCode).toBe(200);
    const ended = await until(
      () => t.call({ url: `/api/v1/messages/${waiting.body.id}`, key: a.key }),
      (r) => r.body.status === 'COMPLETED',
      3000,
    );
    expect(ended.body.status).toBe('COMPLETED');
  });

  it("a workspace's waiting turns are checked together, not each on its own", async () => {
    const a = await t.tenant();
    for (let i = 0; i < 20; i++) {
      const r = await t.call({ method: 'POST', url: '/api/v1/messages', key: a.key, body: CALLS_GET_ORDER });
      expect(r.body.status).toBe('WAITING_CLIENT');
    }
    await new Promise((r) => setTimeout(r, 300));
    const start = queriesOfCalls;
    await new Promise((r) => setTimeout(r, 1000));
    // One check a tick (every 200 ms) per workspace with waiting turns (this one, and the first
    // test's): about 10 in that second. Each of the 20 turns polling on its own read
    // function_calls 100 times.
    expect(queriesOfCalls - start).toBeLessThanOrEqual(20);
  });
});
