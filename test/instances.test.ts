// Several instances (issue 10): two server processes on one PostgreSQL and one Redis share the
// per-IP rate limit, the MCP slots and the job queue (no job runs twice).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../src/domain/scopes.js';
import { api, freshPostgresSchema, type ServerProcess, startServerProcess } from './support/process.js';

const enabled = Boolean(process.env.TEST_DATABASE_URL && process.env.TEST_REDIS_URL);

describe.runIf(enabled)('two instances on one PostgreSQL and Redis', () => {
  let database: Awaited<ReturnType<typeof freshPostgresSchema>>;
  let one: ServerProcess;
  let two: ServerProcess;
  let key: string;

  beforeAll(async () => {
    database = await freshPostgresSchema(process.env.TEST_DATABASE_URL as string);
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: process.env.TEST_REDIS_URL as string,
      REDIS_KEY_PREFIX: `inst-${randomBytes(4).toString('hex')}:`,
      RATE_LIMIT_PER_MINUTE: '400',
      MCP_MAX_CONCURRENT: '1',
      MCP_SLOT_WAIT_MS: '300',
      JOB_POLL_MS: '50',
    };
    one = await startServerProcess(env);
    two = await startServerProcess(env);
    await api(one.url, 'POST', '/admin/v1/tenants', { body: { tenant_id: 'multi', name: 'Multi' } });
    key = (await api(two.url, 'POST', '/admin/v1/tenants/multi/api-keys', { body: { name: 'k', scopes: ALL_SCOPES } }))
      .body.secret;
  }, 120_000);

  afterAll(async () => {
    await one?.kill('SIGTERM');
    await two?.kill('SIGTERM');
    await database?.drop();
  });

  it('share the MCP slots: a tool call on one instance holds the only slot against the other', async () => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const call = (base: string) =>
      fetch(`${base}/api/v1/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'x-api-key': key,
          'mcp-protocol-version': '2025-06-18',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'list_apps', arguments: {} },
        }),
      });
    try {
      await client.query('begin');
      await client.query('lock table apps in access exclusive mode');
      const slow = call(one.url);
      await new Promise((r) => setTimeout(r, 250));
      const refused = await call(two.url);
      await client.query('commit');
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('concurrency_limit_exceeded');
      expect((await slow).status).toBe(200);
    } finally {
      await client.end();
    }
  });

  it('share the job queue: every job runs once, whichever instance claims it', async () => {
    const sources: string[] = [];
    for (let i = 0; i < 8; i++) {
      const base = i % 2 === 0 ? one.url : two.url;
      const source = await api(base, 'POST', '/api/v1/sources', {
        key,
        body: { name: `s${i}`, source_type: 'manual' },
      });
      expect(source.status).toBe(201);
      sources.push(source.body.id);
      expect((await api(base, 'POST', `/api/v1/sources/${source.body.id}/sync`, { key })).status).toBe(202);
    }
    const deadline = Date.now() + 30_000;
    for (const id of sources) {
      for (;;) {
        const source = await api(one.url, 'GET', `/api/v1/sources/${id}`, { key });
        if (source.body.sync_status === 'synced') break;
        expect(source.body.sync_status).not.toBe('failed');
        if (Date.now() > deadline) throw new Error(`source ${id} not synced: ${JSON.stringify(source.body)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query("select status, attempts from jobs where tenant_id = 'multi'");
      expect(rows.length).toBeGreaterThanOrEqual(sources.length);
      for (const row of rows) expect(row).toEqual({ status: 'succeeded', attempts: 1 });
    } finally {
      await client.end();
    }
  });

  it('share the per-IP rate limit', async () => {
    const first = Number((await api(one.url, 'GET', '/api/v1/apps', { key })).headers.get('ratelimit-remaining'));
    const second = Number((await api(two.url, 'GET', '/api/v1/apps', { key })).headers.get('ratelimit-remaining'));
    const third = Number((await api(one.url, 'GET', '/api/v1/apps', { key })).headers.get('ratelimit-remaining'));
    // One budget: the two instances count down the same counter.
    expect([second, third]).toEqual([first - 1, first - 2]);
    let refusedAt = -1;
    for (let i = 0; i <= first; i++) {
      const r = await api(i % 2 === 0 ? two.url : one.url, 'GET', '/api/v1/apps', { key });
      if (r.status === 429) {
        refusedAt = i;
        expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
        break;
      }
    }
    // Refused once the shared budget is spent, not after twice the limit.
    expect(refusedAt).toBe(first - 2);
  });
});
