// The typed client's transport against a live listener behind a gateway that fails on demand:
// network errors and 503 retried with backoff (Retry-After honoured), a POST retried under one
// Idempotency-Key so the server runs it once, the caller's own key kept, a timeout per attempt
// (a stream's: between chunks) as WorkspaceTimeoutError, and an AbortSignal during a retry's wait.
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  backoffMs,
  createWorkspaceClient,
  type RetryInfo,
  type TurnEvent,
  WorkspaceAbortError,
  WorkspaceApiError,
  WorkspaceConnectionError,
  WorkspaceTimeoutError,
} from '../../client/src/index.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { startGateway } from './gateway.js';

let t: TestApp;
let gateway: Awaited<ReturnType<typeof startGateway>>;

beforeAll(async () => {
  t = await startTestApp({ CLIENT_FUNCTION_TIMEOUT_MS: '30000' });
  gateway = await startGateway(await t.app.listen({ port: 0, host: '127.0.0.1' }));
});
afterEach(() => {
  gateway.sent.length = 0;
});
afterAll(async () => {
  await gateway.close();
  await t.close();
});

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

/** A port nothing listens on (a listener's, closed). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const keysSent = () => gateway.sent.map((s) => s.headers['idempotency-key']);

describe('retries', () => {
  it('a network error is retried after a backoff, and the call then succeeds', async () => {
    const { key } = await t.tenant(['apps:read']);
    const retries: RetryInfo[] = [];
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, onRetry: (r) => retries.push(r) });
    gateway.fail('drop');
    const list = await ws.get('/api/v1/apps');
    expect(list.object).toBe('list');
    expect(gateway.sent).toHaveLength(2);
    expect(retries).toMatchObject([{ attempt: 1, reason: 'connection_error' }]);
    expect(retries[0]?.status).toBeUndefined();
    // A GET is not given a key: it changes nothing.
    expect(keysSent()).toEqual([undefined, undefined]);
  });

  it('a POST whose answer was lost is retried under the same Idempotency-Key: the server runs it once', async () => {
    const { key } = await t.tenant(['apps:write']);
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key });
    gateway.fail('drop-after');
    const app = await ws.post('/api/v1/apps', { body: { name: 'once' } });
    expect(app).toMatchObject({ object: 'app', name: 'once' });
    const [first, second] = keysSent();
    expect(first).toMatch(/^[0-9a-f-]{36}$/);
    expect(second).toBe(first);
    const direct = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key });
    const listed = await direct.get('/api/v1/apps');
    expect(listed.data.map((a) => a.name)).toEqual(['once']);

    // Each call has its own key.
    await ws.post('/api/v1/apps', { body: { name: 'twice' } });
    expect(keysSent().at(-1)).toMatch(/^[0-9a-f-]{36}$/);
    expect(keysSent().at(-1)).not.toBe(first);
  });

  it('the caller’s own Idempotency-Key is sent on every attempt, never replaced', async () => {
    const { key } = await t.tenant(['apps:write']);
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key });
    gateway.fail('drop-after');
    await ws.post('/api/v1/apps', {
      params: { header: { 'Idempotency-Key': 'my-own-key' } },
      body: { name: 'mine' },
    });
    expect(keysSent()).toEqual(['my-own-key', 'my-own-key']);
  });

  it('without retries a POST is sent without a key; the network error is a WorkspaceConnectionError', async () => {
    const { key } = await t.tenant(['apps:write']);
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, maxRetries: 0 });
    gateway.fail('drop');
    const error = await caught(ws.post('/api/v1/apps', { body: { name: 'lost' } }));
    expect(error).toBeInstanceOf(WorkspaceConnectionError);
    expect(error).toBeInstanceOf(WorkspaceApiError);
    expect(error).toMatchObject({ status: 0, type: 'api_connection_error', code: 'connection_error' });
    expect(keysSent()).toEqual([undefined]);
  });

  it('network errors past maxRetries throw WorkspaceConnectionError after maxRetries + 1 attempts', async () => {
    const { key } = await t.tenant(['apps:read']);
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, maxRetries: 2 });
    gateway.fail('drop', 'drop', 'drop');
    const error = await caught(ws.get('/api/v1/apps'));
    expect(error).toBeInstanceOf(WorkspaceConnectionError);
    expect(gateway.sent).toHaveLength(3);

    // Nothing listening: refused, retried, then thrown naming the origin only.
    const port = await freePort();
    const closed = createWorkspaceClient({ baseUrl: `http://127.0.0.1:${port}/`, apiKey: key, maxRetries: 1 });
    const refused = await caught(closed.get('/api/v1/apps', { params: { query: { limit: 5 } } }));
    expect(refused).toBeInstanceOf(WorkspaceConnectionError);
    expect((refused as Error).message).toContain(`http://127.0.0.1:${port}`);
    expect((refused as Error).message).toContain('ECONNREFUSED');
    expect((refused as Error).message).not.toContain('limit');
  });

  it('a 503 is retried after its Retry-After', async () => {
    const { key } = await t.tenant(['apps:read']);
    const retries: RetryInfo[] = [];
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, onRetry: (r) => retries.push(r) });
    gateway.fail('unavailable');
    const list = await ws.get('/api/v1/apps');
    expect(list.object).toBe('list');
    expect(retries).toMatchObject([{ attempt: 1, reason: 'unavailable', status: 503, delayMs: 1000 }]);

    // Not retried, a gateway's 503 (no API error body) is still a WorkspaceApiError.
    const once = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, maxRetries: 0 });
    gateway.fail('unavailable');
    expect(await caught(once.get('/api/v1/apps'))).toMatchObject({
      status: 503,
      code: 'http_error',
      retryAfter: 1,
    });
  });

  it('an AbortSignal ends a retry’s wait', async () => {
    const { key } = await t.tenant(['apps:read']);
    const controller = new AbortController();
    const ws = createWorkspaceClient({
      baseUrl: gateway.url,
      apiKey: key,
      maxRetryDelayMs: 600_000,
      onRetry: () => controller.abort(),
    });
    gateway.fail('unavailable');
    const error = await caught(ws.get('/api/v1/apps', { signal: controller.signal }));
    expect(error).toBeInstanceOf(WorkspaceAbortError);
    expect(gateway.sent).toHaveLength(1);
  });

  it('the backoff doubles from 0.5 s up to 8 s, each wait between half and all of its step', () => {
    expect([0, 1, 2, 3, 4, 10].map((n) => backoffMs(n, () => 1))).toEqual([500, 1000, 2000, 4000, 8000, 8000]);
    expect([0, 1, 10].map((n) => backoffMs(n, () => 0))).toEqual([250, 500, 4000]);
  });
});

describe('timeouts', () => {
  it('an answer that does not come within timeoutMs throws WorkspaceTimeoutError, not retried', async () => {
    const { key } = await t.tenant(['apps:read']);
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, timeoutMs: 300 });
    gateway.fail('hang');
    const error = await caught(ws.get('/api/v1/apps'));
    expect(error).toBeInstanceOf(WorkspaceTimeoutError);
    expect(error).toMatchObject({ status: 0, code: 'timeout', timeoutMs: 300 });
    expect(gateway.sent).toHaveLength(1);

    // A call's own timeoutMs overrides the client's (none here).
    const patient = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, timeoutMs: 0 });
    gateway.fail('hang');
    expect(await caught(patient.get('/api/v1/apps', { timeoutMs: 200 }))).toMatchObject({ timeoutMs: 200 });
    expect((await patient.get('/api/v1/apps')).object).toBe('list');
  });

  it('a stream that sends nothing for timeoutMs throws WorkspaceTimeoutError; keep-alives hold it open', async () => {
    const { key } = await t.tenant();
    // Long enough for the turn to start on a busy machine, far shorter than the silence that follows.
    const ws = createWorkspaceClient({ baseUrl: gateway.url, apiKey: key, timeoutMs: 5000 });
    const body = {
      content: 'please get_order',
      client_functions: [{ name: 'get_order', parameters: { type: 'object', properties: {} } }],
    };
    const seen: TurnEvent[] = [];
    const error = await caught(
      (async () => {
        // The turn waits for a result: the server says nothing until SSE_HEARTBEAT_MS (15 s).
        for await (const event of ws.streamMessage(body)) seen.push(event);
      })(),
    );
    expect(error).toBeInstanceOf(WorkspaceTimeoutError);
    expect(seen.at(-1)?.event).toBe('function_call');

    // With keep-alives more often than the timeout, the same wait does not time out.
    const beating = await startTestApp({ CLIENT_FUNCTION_TIMEOUT_MS: '6000', SSE_HEARTBEAT_MS: '100' });
    try {
      const tenant = await beating.tenant();
      const base = await beating.app.listen({ port: 0, host: '127.0.0.1' });
      const kept = createWorkspaceClient({ baseUrl: base, apiKey: tenant.key, timeoutMs: 3000 });
      const last = await kept.streamMessage(body).finalMessage();
      expect(last).toMatchObject({ status: 'FAILED', error: { code: 'client_timeout' } });
    } finally {
      await beating.close();
    }
  }, 120_000);
});
