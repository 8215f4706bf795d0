// The per-IP rate limit (src/http/rate-limit.ts) beyond what http.test.ts checks: windows that
// end, the documentation left unlimited, the router's own refusals counted, a Redis that does not
// answer letting requests pass, and the client's address behind proxies (TRUST_PROXY).
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { memoryCounter } from '../../src/http/rate-limit.js';
import { ADMIN_TOKEN, startTestApp } from '../helpers.js';

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

  it("counts the router's own refusals (bad percent-encoding, an over-long segment) against the budget of a path with no route", async () => {
    const t = await startTestApp({ RATE_LIMIT_PER_MINUTE: '2' });
    apps.push(t);
    const badUrl = '/api/v1/apps/%E0%A4%A';
    const longSegment = `/api/v1/apps/${'a'.repeat(300)}`;
    const first = await t.call({ url: badUrl, headers: { 'x-request-id': 'router-1' } });
    expect(first.status).toBe(400);
    expect(first.body.error.code).toBe('bad_request');
    expect(first.headers).toMatchObject({
      'x-request-id': 'router-1',
      'ratelimit-limit': '2',
      'ratelimit-remaining': '1',
    });
    expect(Number(first.headers['ratelimit-reset'])).toBeGreaterThan(0);
    const second = await t.call({ url: longSegment });
    expect(second.status).toBe(404);
    expect(second.body.error.code).toBe('not_found');
    expect(second.headers).toMatchObject({ 'ratelimit-limit': '2', 'ratelimit-remaining': '0' });
    expect(second.headers['x-request-id']).toBeDefined();
    // The third in the minute, of either kind, is refused as any request over the budget is.
    for (const url of [badUrl, longSegment]) {
      const refused = await t.call({ url, headers: { 'x-request-id': 'router-2' } });
      expect(refused.status, url).toBe(429);
      expect(refused.body.error, url).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
      expect(refused.headers, url).toMatchObject({ 'x-request-id': 'router-2', 'ratelimit-remaining': '0' });
      expect(Number(refused.headers['retry-after']), url).toBeGreaterThan(0);
    }
    // They spent the address's budget: its other requests are refused too, with the same answer.
    const routed = await t.call({ url: '/api/v1/apps' });
    expect(routed.status).toBe(429);
    expect(routed.headers['retry-after']).toBeDefined();
    const refused = await t.call({ url: badUrl });
    expect(Object.keys(refused.body.error).sort()).toEqual(Object.keys(routed.body.error).sort());
    expect(refused.body.error.message).toBe(
      routed.body.error.message.replace(/\d+ s\.$/, `${refused.headers['retry-after']} s.`),
    );
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
    // So do the router's own refusals.
    for (let i = 0; i < 3; i++) {
      const r = await built.app.inject({ url: '/api/v1/apps/%E0%A4%A' });
      expect(r.statusCode).toBe(400);
      expect(r.headers['ratelimit-limit']).toBeUndefined();
    }
  });
});

describe('the client behind a proxy (TRUST_PROXY)', () => {
  const apps: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  /** Statuses of `/api/v1/apps` asked once per X-Forwarded-For, from the socket address `from`. */
  async function statuses(t: Awaited<ReturnType<typeof startTestApp>>, forwarded: string[], from = '127.0.0.1') {
    const out: number[] = [];
    for (const xff of forwarded) {
      const r = await t.app.inject({ url: '/api/v1/apps', remoteAddress: from, headers: { 'x-forwarded-for': xff } });
      out.push(r.statusCode);
    }
    return out;
  }
  /** The scheme of a doc_url link: X-Forwarded-Proto's when the socket is a trusted proxy's. */
  async function scheme(t: Awaited<ReturnType<typeof startTestApp>>, from = '127.0.0.1') {
    const r = await t.app.inject({
      url: '/api/v1/apps',
      remoteAddress: from,
      headers: { 'x-forwarded-proto': 'https' },
    });
    return new URL(JSON.parse(r.body).error.doc_url).protocol;
  }
  const spoofed = (client: string, n = 4) => Array.from({ length: n }, (_, i) => `198.51.100.${i + 1}, ${client}`);

  it('true trusts one proxy: the client is the address it saw (the rightmost), whatever the client wrote left of it', async () => {
    const t = await startTestApp({ TRUST_PROXY: 'true', RATE_LIMIT_PER_MINUTE: '2' });
    apps.push(t);
    // 401: past the limit, refused for want of a key.
    expect(await statuses(t, spoofed('203.0.113.7'))).toEqual([401, 401, 429, 429]);
    // Another client behind the same proxy has a budget of its own.
    expect(await statuses(t, ['198.51.100.1, 203.0.113.8'])).toEqual([401]);
    // X-Forwarded-Proto still counts (the Secure flag of the owners' session cookie).
    expect(await scheme(t)).toBe('https:');
  });

  it("counts the router's own refusals against the client's budget, not the proxy's", async () => {
    const t = await startTestApp({ TRUST_PROXY: 'true', RATE_LIMIT_PER_MINUTE: '1' });
    apps.push(t);
    const badUrl = (client: string) =>
      t.app.inject({ url: '/api/v1/apps/%E0%A4%A', headers: { 'x-forwarded-for': `198.51.100.1, ${client}` } });
    expect((await badUrl('203.0.113.7')).statusCode).toBe(400);
    expect((await badUrl('203.0.113.7')).statusCode).toBe(429);
    // Another client behind the same proxy has a budget of its own; the first has spent its own.
    expect((await badUrl('203.0.113.8')).statusCode).toBe(400);
    expect(await statuses(t, ['203.0.113.7', '203.0.113.9'])).toEqual([429, 401]);
    // Their doc_url has the scheme and host the client used, as the proxy reports them.
    const proxied = await t.app.inject({
      url: '/api/v1/apps/%E0%A4%A',
      headers: {
        'x-forwarded-for': '203.0.113.10',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'api.example.com',
      },
    });
    expect(JSON.parse(proxied.body).error.doc_url).toBe('https://api.example.com/docs/errors#bad_request');
  });

  it('a number N trusts the N proxies nearest us: the client is the Nth address from the right', async () => {
    const t = await startTestApp({ TRUST_PROXY: '2', RATE_LIMIT_PER_MINUTE: '2' });
    apps.push(t);
    const forwarded = spoofed('203.0.113.7, 10.0.0.9').map((xff, i) => xff.replace('10.0.0.9', `10.0.0.${i + 1}`));
    expect(await statuses(t, forwarded)).toEqual([401, 401, 429, 429]);
    expect(await scheme(t)).toBe('https:');
  });

  it('a list trusts the proxies at those addresses only: from anywhere else X-Forwarded-For is ignored', async () => {
    const t = await startTestApp({ TRUST_PROXY: '10.0.0.2, 10.1.0.0/16', RATE_LIMIT_PER_MINUTE: '2' });
    apps.push(t);
    // Through the proxy at 10.0.0.2 and an inner one in 10.1.0.0/16: the client is the next address.
    const through = spoofed('203.0.113.7, 10.1.2.3');
    expect(await statuses(t, through, '10.0.0.2')).toEqual([401, 401, 429, 429]);
    expect(await statuses(t, ['203.0.113.8'], '10.0.0.2')).toEqual([401]);
    // A client connecting directly is its socket's address, whatever it writes.
    expect(await statuses(t, spoofed('203.0.113.9'), '192.0.2.50')).toEqual([401, 401, 429, 429]);
    // The router's own refusals are counted against the same client's budget.
    const badUrl = () =>
      t.app.inject({
        url: '/api/v1/apps/%E0%A4%A',
        remoteAddress: '10.0.0.2',
        headers: { 'x-forwarded-for': '203.0.113.10' },
      });
    expect([(await badUrl()).statusCode, (await badUrl()).statusCode]).toEqual([400, 400]);
    expect(await statuses(t, ['203.0.113.10'], '10.0.0.2')).toEqual([429]);
    // So is its X-Forwarded-Proto.
    expect(await scheme(t, '10.1.2.3')).toBe('https:');
    expect(await scheme(t, '192.0.2.51')).toBe('http:');
  });

  it('reads true, false, a number of proxies or a list of addresses and ranges; anything else stops the start', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '0' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '3' }).trustProxy).toBe(3);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.2, 10.1.0.0/16,::1, fd00::/8' }).trustProxy).toEqual([
      '10.0.0.2',
      '10.1.0.0/16',
      '::1',
      'fd00::/8',
    ]);
    for (const bad of [
      'maybe',
      '10.0.0',
      '10.0.0.0/33',
      '0.0.0.0/0',
      '10.0.0.1/',
      '10.0.0.1,',
      'proxy.internal',
      '33',
    ]) {
      expect(() => loadConfig({ TRUST_PROXY: bad }), bad).toThrow(ConfigError);
      try {
        loadConfig({ TRUST_PROXY: bad });
      } catch (error) {
        expect((error as Error).message).toMatch(/^TRUST_PROXY must /);
        expect((error as Error).message).not.toContain('\n');
      }
    }
  });
});
