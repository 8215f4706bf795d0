// Shutdown (src/app.ts): once `app.close()` begins, a request that still arrives (on a
// connection kept alive by one in flight) answers 503 `service_unavailable` in the spec's error
// shape with Retry-After, not Fastify's own body; /readyz answers 503 from `drain()` or the start
// of the close, so load balancers stop sending requests; and /readyz waits for a database that
// does not answer at most READY_CHECK_TIMEOUT_MS.
import net from 'node:net';
import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { READY_CHECK_TIMEOUT_MS } from '../../src/app.js';
import { startTestApp, type TestApp } from '../helpers.js';

/** A gate a test route waits on: `opened` once the route waits, `open()` lets it answer. */
function gate() {
  let open = () => {};
  let entered = () => {};
  const opens = new Promise<void>((resolve) => {
    open = resolve;
  });
  const opened = new Promise<void>((resolve) => {
    entered = resolve;
  });
  return { open, opened, entered, opens };
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** HTTP/1.1 answers read off a raw socket, in order, until it closes. */
function answersOf(socket: net.Socket): Promise<RawAnswer[]> {
  let data = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => {
    data += chunk;
  });
  return new Promise((resolve, reject) => {
    socket.on('error', reject);
    socket.on('close', () => {
      const answers: RawAnswer[] = [];
      let rest = data;
      while (rest.startsWith('HTTP/1.1')) {
        const end = rest.indexOf('\r\n\r\n');
        const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines) {
          const at = line.indexOf(':');
          headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        const body = rest.slice(end + 4, end + 4 + length);
        answers.push({ status: Number(statusLine?.split(' ')[1]), headers, body });
        rest = rest.slice(end + 4 + length);
      }
      resolve(answers);
    });
  });
}

describe('a server that closes while requests arrive', () => {
  it('answers them 503 service_unavailable in the error shape with Retry-After, and /readyz 503, while the one in flight finishes', async () => {
    const slow = [gate(), gate()];
    let next = 0;
    const t = await startTestApp(
      {},
      {
        routes: (app) =>
          app.get('/test/slow', async () => {
            const mine = slow[next++] as ReturnType<typeof gate>;
            mine.entered();
            await mine.opens;
            return { finished: true };
          }),
      },
    );
    const { key } = await t.tenant();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as net.AddressInfo;
    const request = (path: string, headers = '') =>
      `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n${headers}\r\n`;

    // Two connections, each with a request in flight when the close begins.
    const sockets = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
    const answers = sockets.map(answersOf);
    (sockets[0] as net.Socket).write(request('/test/slow'));
    await slow[0]?.opened;
    (sockets[1] as net.Socket).write(request('/test/slow'));
    await slow[1]?.opened;

    const closed = t.close();
    for (let i = 0; i < 200 && t.app.server.listening; i++) await new Promise((r) => setTimeout(r, 5));
    expect(t.app.server.listening).toBe(false);
    // Requests that arrive now, behind the ones in flight.
    (sockets[0] as net.Socket).write(request('/api/v1/apps', `X-API-Key: ${key}\r\n`));
    (sockets[1] as net.Socket).write(request('/readyz'));
    await new Promise((r) => setTimeout(r, 50));
    for (const g of slow) g.open();
    const [first, second] = await Promise.all(answers);
    await closed;

    expect(first?.[0]?.status).toBe(200);
    const refused = first?.[1] as RawAnswer;
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('2');
    expect(refused.headers['x-request-id']).toBeTruthy();
    expect(JSON.parse(refused.body)).toEqual({
      error: {
        type: 'api_error',
        code: 'service_unavailable',
        message: expect.stringContaining('shutting down'),
        doc_url: 'http://localhost/docs/errors#service_unavailable',
      },
    });

    expect(second?.[0]?.status).toBe(200);
    const ready = second?.[1] as RawAnswer;
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toEqual({ status: 'unavailable', reason: 'shutting down' });
  });
});

describe('/readyz', () => {
  let t: TestApp;
  let stalled = false;
  let release = () => {};
  // A database that takes a statement and does not answer it (until released).
  const stall: KyselyPlugin = {
    transformQuery: (args) => args.node,
    transformResult: async (args) => {
      if (stalled) await new Promise<void>((resolve) => (release = resolve));
      return args.result;
    },
  };

  beforeAll(async () => {
    t = await startTestApp({}, { wrapDb: (db) => db.withPlugin(stall) });
  });
  afterAll(() => t.close());

  it('answers 503 when the database does not answer within READY_CHECK_TIMEOUT_MS, and 200 once it does', async () => {
    expect((await t.call({ url: '/readyz' })).status).toBe(200);
    stalled = true;
    const started = Date.now();
    const [a, b] = await Promise.all([t.call({ url: '/readyz' }), t.call({ url: '/readyz' })]);
    const took = Date.now() - started;
    expect([a.status, b.status]).toEqual([503, 503]);
    expect(a.body).toEqual({ status: 'unavailable', reason: 'database not reachable' });
    expect(took).toBeGreaterThanOrEqual(READY_CHECK_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(READY_CHECK_TIMEOUT_MS + 1_000);
    stalled = false;
    release();
    expect((await t.call({ url: '/readyz' })).status).toBe(200);
  }, 10_000);

  it('answers 503 once shutdown has begun (drain), while the API still answers', async () => {
    const { key } = await t.tenant();
    t.drain();
    expect(await t.call({ url: '/readyz' })).toMatchObject({
      status: 503,
      body: { status: 'unavailable', reason: 'shutting down' },
    });
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    expect((await t.call({ url: '/healthz' })).status).toBe(200);
  });
});
