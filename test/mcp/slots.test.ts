// MCP concurrency slots per tenant (docs/mcp.md, Concurrency): one tenant holds at most half of
// MCP_MAX_CONCURRENT (rounded up), in this process's pool, in the Redis pool shared by instances,
// and in the local pool that stands in while Redis does not answer.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/lib/redis.js';
import { createLocalSlots, createRedisSlots, tenantSlotKey } from '../../src/mcp/slots.js';
import { startTestApp, type TestApp } from '../helpers.js';

describe('MCP slots over HTTP', () => {
  let t: TestApp;
  let url: string;

  beforeAll(async () => {
    t = await startTestApp({ MCP_MAX_CONCURRENT: '4', MCP_SLOT_WAIT_MS: '300' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v1/mcp`;
  });
  afterAll(() => t.close());

  const rpc = (key: string, method: string, params: unknown) =>
    fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': key,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
  const listApps = (key: string) => rpc(key, 'tools/call', { name: 'list_apps', arguments: {} });

  it('a tenant holding its half of the slots gets 429 while another tenant still gets a slot at once', async () => {
    const a = await t.tenant(['apps:read']);
    const b = await t.tenant(['apps:read']);
    // Warm the key cache, so the next requests authenticate without the database.
    expect((await listApps(a.key)).status).toBe(200);
    expect((await listApps(b.key)).status).toBe(200);

    // Slow tool calls: a transaction holds the apps table (on PGlite, the whole database), so each
    // of A's list_apps waits on it in its slot.
    let locked = true;
    const tx = t.database.db.transaction().execute(async (trx) => {
      await sql`lock table apps in access exclusive mode`.execute(trx);
      await new Promise((r) => setTimeout(r, 1500));
      locked = false;
    });
    await new Promise((r) => setTimeout(r, 50));
    const calls = [0, 1, 2, 3].map(() => listApps(a.key));
    await new Promise((r) => setTimeout(r, 100));
    // tools/list needs no database: B answers while A's calls still wait on the lock.
    const other = await rpc(b.key, 'tools/list', {});
    const answeredWhileLocked = locked;
    const answers = await Promise.all(calls);
    await tx;

    expect(other.status).toBe(200);
    expect(answeredWhileLocked).toBe(true);
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 429, 429]);
    for (const refused of answers.filter((r) => r.status === 429)) {
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(((await refused.json()) as { error: unknown }).error).toMatchObject({
        type: 'rate_limit_error',
        code: 'concurrency_limit_exceeded',
      });
    }
  });
});

describe('MCP slot pools', () => {
  it('in the process pool, a tenant takes half the slots (rounded up) and waits for its own to free', async () => {
    const pool = createLocalSlots(5);
    const held = [await pool.acquire('a', 0), await pool.acquire('a', 0), await pool.acquire('a', 0)];
    expect(held.every(Boolean)).toBe(true);
    expect(await pool.acquire('a', 20)).toBeNull();
    const waiting = pool.acquire('a', 1000);
    const b = await pool.acquire('b', 0);
    expect(b).not.toBeNull();
    await held[0]?.();
    const granted = await waiting;
    expect(granted).not.toBeNull();
    for (const release of [granted, b, held[1], held[2]]) await release?.();
  });

  it('while Redis does not answer, the local slots apply the same share', async () => {
    // Nothing listens on port 1: every command fails at once, and the pool counts locally.
    const down = await connectRedis('redis://127.0.0.1:1');
    try {
      const pool = createRedisSlots(down, 4, 'test-mcp-slots-down');
      const held = [await pool.acquire('a', 0), await pool.acquire('a', 0)];
      expect(held.every(Boolean)).toBe(true);
      expect(await pool.acquire('a', 50)).toBeNull();
      const b = await pool.acquire('b', 0);
      expect(b).not.toBeNull();
      for (const release of [...held, b]) await release?.();
    } finally {
      down.disconnect();
    }
  });

  it.runIf(Boolean(process.env.TEST_REDIS_URL))(
    'in the Redis pool, a tenant holds half the slots across instances, and its set expires',
    async () => {
      const redis = await connectRedis(process.env.TEST_REDIS_URL as string);
      const key = `test-mcp-slots-${Date.now()}`;
      const one = createRedisSlots(redis, 4, key);
      const two = createRedisSlots(redis, 4, key);
      try {
        const held = [await one.acquire('a', 0), await two.acquire('a', 0)];
        expect(held.every(Boolean)).toBe(true);
        expect(await one.acquire('a', 100)).toBeNull();
        expect(await two.acquire('a', 100)).toBeNull();
        expect(await redis.pttl(tenantSlotKey(key, 'a'))).toBeGreaterThan(0);
        const b = [await one.acquire('b', 0), await two.acquire('b', 0)];
        expect(b.every(Boolean)).toBe(true);
        // All four taken: a third tenant waits for any slot, and gets the one that frees.
        const waiting = two.acquire('c', 1000);
        await b[0]?.();
        const granted = await waiting;
        expect(granted).not.toBeNull();
        // A's share frees with its own slot, in both sets at once.
        await held[0]?.();
        expect(await redis.zcard(tenantSlotKey(key, 'a'))).toBe(1);
        expect(await redis.zcard(key)).toBe(3);
        const again = await one.acquire('a', 0);
        expect(again).not.toBeNull();
        for (const release of [again, held[1], b[1], granted]) await release?.();
        expect(await redis.zcard(key)).toBe(0);
      } finally {
        await redis.del(key, tenantSlotKey(key, 'a'), tenantSlotKey(key, 'b'), tenantSlotKey(key, 'c'));
        redis.disconnect();
      }
    },
  );
});
