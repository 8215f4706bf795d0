// The per-IP rate limit (src/http/rate-limit.ts) beyond what http.test.ts checks: windows that
// end, the documentation left unlimited, and a Redis that does not answer letting requests pass.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/client.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { memoryCounter } from '../src/http/rate-limit.js';
import { buildApp } from '../src/server.js';
import { ADMIN_TOKEN, startTestApp } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('counters in memory', () => {
  it('count per key within a window, and start again once it has ended', async () => {
    const counter = memoryCounter();
    expect(counter.hit('a', 80)).toMatchObject({ count: 1 });
    expect(counter.hit('a', 80)).toMatchObject({ count: 2 });
    expect(counter.hit('b', 80)).toMatchObject({ count: 1 });
    const third = counter.hit('a', 80);
    expect(third).toMatchObject({ count: 3 });
    expect((third as { resetMs: number }).resetMs).toBeGreaterThan(0);
    expect((third as { resetMs: number }).resetMs).toBeLessThanOrEqual(80);
    await sleep(100);
    expect(counter.hit('a', 80)).toMatchObject({ count: 1 });
  });
});

describe('the limit on the app', () => {
  const apps: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  it('leaves the documentation, the OpenAPI document and the probes unlimited', async () => {
    const t = await startTestApp({ RATE_LIMIT_PER_MINUTE: '1' });
    apps.push(t);
    for (const url of ['/api/v1/openapi.json', '/docs/errors', '/docs/', '/healthz', '/readyz']) {
      for (let i = 0; i < 3; i++) {
        const r = await t.call({ url });
        expect(r.status, url).toBeLessThan(400);
        expect(r.headers['ratelimit-limit'], url).toBeUndefined();
      }
    }
    // The API itself is limited: the second call in the minute is refused.
    expect((await t.call({ url: '/api/v1/apps' })).headers['ratelimit-remaining']).toBe('0');
    expect((await t.call({ url: '/api/v1/apps' })).status).toBe(429);
  });

  it('counts refused operator tokens too, so the control plane cannot be guessed at without end', async () => {
    const t = await startTestApp({ RATE_LIMIT_PER_MINUTE: '3' });
    apps.push(t);
    const wrong = { authorization: 'Bearer not-the-operator-token' };
    for (let i = 0; i < 3; i++) {
      const r = await t.call({ url: '/admin/v1/tenants', headers: wrong });
      expect(r.status).toBe(401);
      expect(r.headers['ratelimit-remaining']).toBe(String(2 - i));
    }
    const refused = await t.call({ url: '/admin/v1/tenants', headers: wrong });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    // The right token is refused too until the window ends: the limit is per address, not per token.
    expect(
      (await t.call({ url: '/admin/v1/tenants', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status,
    ).toBe(429);
  });

  it('lets requests pass uncounted while Redis does not answer', async () => {
    const database = await openDatabase({});
    await migrateToLatest(database.db);
    // Nothing listens on port 1; no retries, no queue: every count fails at once.
    const redis = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    redis.on('error', () => {});
    const built = await buildApp({
      config: loadConfig({ LOG_LEVEL: 'silent', ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: '1' }),
      db: database.db,
      redis,
    });
    apps.push({
      close: async () => {
        await built.app.close();
        redis.disconnect();
        await database.close();
      },
    });
    for (let i = 0; i < 3; i++) {
      const r = await built.app.inject({ url: '/api/v1/apps' });
      expect(r.statusCode).toBe(401); // past the limit's check, refused for want of a key
      expect(r.headers['ratelimit-limit']).toBeUndefined();
    }
  });
});
