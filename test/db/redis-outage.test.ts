// A Redis that does not answer (docs/api.md: Rate limits; docs/mcp.md: Concurrency): with REDIS_URL set
// and nothing listening there, REST requests pass uncounted and MCP calls take this instance's
// slots, at normal speed, and the outage is logged once; when Redis answers again, rate limits and
// MCP slots are shared again. Redis comes back through a proxy to TEST_REDIS_URL that starts
// listening on the port the app was given; a proxy that falls silent on its open connections is a
// Redis that stops answering without closing them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../src/domain/accounts/scopes.js';
import { connectRedis } from '../../src/lib/redis.js';
import { createRedisSlots } from '../../src/mcp/slots.js';
import { type CallResult, startTestApp, type TestApp } from '../helpers.js';
import { api, freePort, freshPostgresSchema, type ServerProcess, startServerProcess } from '../support/process.js';

const TOOL_CALL = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_apps', arguments: {} } };
const MCP_HEADERS = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
const OUTAGE = 'Redis does not answer';

/** A Redis URL at a port that was free a moment ago: nothing listens there. */
async function unansweredRedisUrl(password = ''): Promise<string> {
  return `redis://${password ? `:${password}@` : ''}127.0.0.1:${await freePort()}`;
}

/** JSON log lines of an app, kept for the test to read. */
function logLines(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { stream, lines };
}

/** The client's next `event` ('reconnecting', 'ready'); events.once would reject on its errors. */
const next = (redis: Redis, event: string): Promise<void> =>
  new Promise((resolve) => redis.once(event, () => resolve()));

const mcpCall = (t: TestApp, key: string): Promise<CallResult> =>
  t.call({ method: 'POST', url: '/api/v1/mcp', key, body: TOOL_CALL, headers: MCP_HEADERS });

/**
 * A TCP proxy to TEST_REDIS_URL, not yet listening. While `silent`, it keeps every connection open
 * and forwards nothing: what a paused Redis, or a link that drops packets, looks like to a client.
 */
function redisProxy() {
  const target = new URL(process.env.TEST_REDIS_URL as string);
  const sockets = new Set<net.Socket>();
  const proxy = {
    silent: false,
    server: net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 6379), target.hostname);
      for (const [from, to] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        sockets.add(from);
        from.on('error', () => from.destroy());
        from.on('close', () => {
          sockets.delete(from);
          to.destroy();
        });
        from.on('data', (chunk) => {
          if (!proxy.silent) to.write(chunk);
        });
      }
    }),
    /** TEST_REDIS_URL (its password, its database) at the proxy's port. */
    url(port: number): string {
      const url = new URL(target);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      proxy.server.close();
    },
  };
  return proxy;
}

describe('a server whose Redis does not answer', () => {
  let server: ServerProcess;
  let postgres: Awaited<ReturnType<typeof freshPostgresSchema>> | undefined;
  let dataDir: string | undefined;
  let key: string;

  beforeAll(async () => {
    // On PostgreSQL when there is one (it starts sooner than a new PGlite data directory), else PGlite.
    const database: Record<string, string> = {};
    if (process.env.TEST_DATABASE_URL) {
      postgres = await freshPostgresSchema(process.env.TEST_DATABASE_URL);
      database.DATABASE_URL = postgres.url;
    } else {
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-redis-outage-'));
      database.DATA_DIR = dataDir;
    }
    server = await startServerProcess({
      ...database,
      REDIS_URL: await unansweredRedisUrl(),
      RATE_LIMIT_PER_MINUTE: '2',
      MCP_MAX_CONCURRENT: '1',
    });
    await api(server.url, 'POST', '/admin/v1/tenants', { body: { tenant_id: 'outage', name: 'Outage' } });
    key = (
      await api(server.url, 'POST', '/admin/v1/tenants/outage/api-keys', { body: { name: 'k', scopes: ALL_SCOPES } })
    ).body.secret;
  }, 120_000);

  afterAll(async () => {
    await server?.kill('SIGTERM');
    await postgres?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers MCP tool calls from the slots of this instance, each slot given back', async () => {
    // One slot (MCP_MAX_CONCURRENT=1): a second call is answered only if the first gave it back.
    for (let i = 0; i < 3; i++) {
      const r = await api(server.url, 'POST', '/api/v1/mcp', { key, body: TOOL_CALL, headers: MCP_HEADERS });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.result.isError).toBeFalsy();
      expect(r.body.result.structuredContent).toMatchObject({ object: 'list' });
    }
  });

  // Each of these requests took 5–10 s while its count waited on ioredis's reconnects: twenty of
  // them would overrun the test's 30 s many times over.
  it('answers REST requests uncounted, past the limit, without waiting on Redis', async () => {
    for (let i = 0; i < 20; i++) {
      const r = await api(server.url, 'GET', '/api/v1/apps', { key });
      expect(r.status).toBe(200);
      expect(r.headers.get('ratelimit-limit')).toBeNull();
    }
  }, 30_000);
});

describe('the outage in the log', () => {
  it('is logged once, however many requests and reconnect attempts it lasts, without the password', async () => {
    const log = logLines();
    const t = await startTestApp(
      { LOG_LEVEL: 'warn' },
      { redisUrl: await unansweredRedisUrl('not-for-the-log'), logStream: log.stream },
    );
    try {
      const { key } = await t.tenant();
      const redis = t.redis;
      if (!redis) throw new Error('no Redis client');
      // Two reconnect attempts at least, and requests between them.
      for (let attempt = 0; attempt < 2; attempt++) {
        await next(redis, 'reconnecting');
        expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
        expect((await mcpCall(t, key)).status).toBe(200);
      }
      const outages = log.lines.filter((line) => line.includes(OUTAGE));
      expect(outages).toHaveLength(1);
      expect(JSON.parse(outages[0] as string)).toMatchObject({
        level: 40,
        err: expect.stringContaining('ECONNREFUSED'),
      });
      expect(log.lines.join('')).not.toContain('not-for-the-log');
    } finally {
      await t.close();
    }
  });
});

describe.runIf(Boolean(process.env.TEST_REDIS_URL))('a Redis that answers again', () => {
  const namespace = `test-outage-${randomBytes(4).toString('hex')}:`;
  const log = logLines();
  let proxy: ReturnType<typeof redisProxy>;
  let proxied: TestApp;
  let direct: TestApp;
  let port: number;
  let key: string;

  beforeAll(async () => {
    proxy = redisProxy();
    port = await freePort();
    const env = { RATE_LIMIT_PER_MINUTE: '6', MCP_MAX_CONCURRENT: '1', MCP_SLOT_WAIT_MS: '100' };
    proxied = await startTestApp(
      { ...env, LOG_LEVEL: 'info' },
      { redisUrl: proxy.url(port), redisNamespace: namespace, logStream: log.stream },
    );
    direct = await startTestApp(env, { redisNamespace: namespace });
    ({ key } = await proxied.tenant());
  });

  afterAll(async () => {
    await proxied?.close();
    await direct?.close();
    proxy?.close();
  });

  it('while it is away, serves MCP from local slots; once back, shares rate limits and slots again', async () => {
    const client = proxied.redis;
    if (!client) throw new Error('no Redis client');
    // A reconnect attempt that fails while the app watches: the outage has begun for it.
    await next(client, 'reconnecting');
    for (let i = 0; i < 2; i++) expect((await mcpCall(proxied, key)).status).toBe(200);
    expect((await proxied.call({ url: '/api/v1/apps', key })).headers['ratelimit-limit']).toBeUndefined();

    const ready = next(client, 'ready');
    proxy.server.listen(port, '127.0.0.1');
    await ready;

    // One budget across both apps again: the direct app counts on from the proxied app's hit (its
    // database does not know the key, but the limit is per address and comes first).
    expect((await proxied.call({ url: '/api/v1/apps', key })).headers['ratelimit-remaining']).toBe('5');
    const counted = await direct.call({ url: '/api/v1/apps', key });
    expect(counted.status).toBe(401);
    expect(counted.headers['ratelimit-remaining']).toBe('4');

    // The only slot, taken in Redis by another instance, holds the proxied app's call off.
    const slotKey = `${namespace}mcp-slots`;
    const redis = await connectRedis(process.env.TEST_REDIS_URL as string);
    try {
      const held = await createRedisSlots(redis, 1, slotKey).acquire('other', 100);
      expect(held).not.toBeNull();
      const refused = await mcpCall(proxied, key);
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('concurrency_limit_exceeded');
      await held?.();
      expect((await mcpCall(proxied, key)).status).toBe(200);
      // The call's slot, taken in Redis, is given back there (just after the answer is sent), not
      // left to its two-minute lease: the other instance gets the only slot.
      const again = await createRedisSlots(redis, 1, slotKey).acquire('other', 5_000);
      expect(again).not.toBeNull();
      await again?.();
    } finally {
      await redis.del(slotKey, `${slotKey}:other`);
      redis.disconnect();
    }

    expect(log.lines.filter((line) => line.includes(OUTAGE))).toHaveLength(1);
    expect(log.lines.filter((line) => line.includes('Redis answers again'))).toHaveLength(1);
  });
});

describe.runIf(Boolean(process.env.TEST_REDIS_URL))('a Redis that stops answering on an open connection', () => {
  const namespace = `test-silent-${randomBytes(4).toString('hex')}:`;
  const log = logLines();
  let proxy: ReturnType<typeof redisProxy>;
  let app: TestApp;
  let key: string;

  beforeAll(async () => {
    proxy = redisProxy();
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    app = await startTestApp(
      { RATE_LIMIT_PER_MINUTE: '1000', MCP_MAX_CONCURRENT: '1', LOG_LEVEL: 'info' },
      {
        redisUrl: proxy.url((proxy.server.address() as net.AddressInfo).port),
        redisNamespace: namespace,
        logStream: log.stream,
      },
    );
    ({ key } = await app.tenant());
  });

  afterAll(async () => {
    await app?.close();
    proxy?.close();
  });

  // Without a command timeout the first request counted through the silent connection waited for
  // ever: this test then ran into its own time limit.
  it('answers requests uncounted and MCP calls from local slots, then counts again once Redis answers', async () => {
    const client = app.redis;
    if (!client) throw new Error('no Redis client');
    expect((await app.call({ url: '/api/v1/apps', key })).headers['ratelimit-limit']).toBe('1000');

    proxy.silent = true;
    const dropped = next(client, 'reconnecting');
    for (let i = 0; i < 5; i++) {
      const r = await app.call({ url: '/api/v1/apps', key });
      expect(r.status).toBe(200);
      expect(r.headers['ratelimit-limit']).toBeUndefined();
      expect((await mcpCall(app, key)).status).toBe(200);
    }
    await dropped;

    const ready = next(client, 'ready');
    proxy.silent = false;
    await ready;
    expect((await app.call({ url: '/api/v1/apps', key })).headers['ratelimit-limit']).toBe('1000');
    const outages = log.lines.filter((line) => line.includes(OUTAGE));
    expect(outages).toHaveLength(1);
    expect(JSON.parse(outages[0] as string).err).toMatch(/did not answer a command within/);
  }, 30_000);
});
