// Several instances: two server processes on one PostgreSQL and one Redis share the
// per-IP rate limit, the MCP slots and the job queue (no job runs twice), and a key revoked or
// locked on one is refused on the other within a second.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../src/domain/accounts/scopes.js';
import { api, freshPostgresSchema, type ServerProcess, startServerProcess } from '../support/process.js';

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
      // The job test's website is on 127.0.0.1.
      ALLOW_PRIVATE_TARGETS: 'true',
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

  it('share the job queue: both instances claim jobs, and every job runs once', async () => {
    // A website whose robots.txt, the first thing each crawl asks for, is held until released:
    // each instance runs at most two jobs at once (the default lane), so more than two crawls held
    // at once means both instances claimed. Each crawl asks once, so the count of asks is the count
    // of runs.
    let held: (() => void)[] = [];
    let releasing = false;
    let asks = 0;
    const site = http.createServer((request, response) => {
      if (request.url === '/robots.txt') {
        asks++;
        const answer = () => response.writeHead(404).end();
        if (releasing) answer();
        else {
          held.push(answer);
          // A crawl that gave up on it (its timeout) is no longer held: it must not count.
          response.on('close', () => {
            held = held.filter((each) => each !== answer);
          });
        }
        return;
      }
      if (request.url?.startsWith('/page-')) {
        response.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body><p>${request.url}</p></body></html>`);
        return;
      }
      response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    try {
      const sources: string[] = [];
      for (let i = 0; i < 8; i++) {
        const base = i % 2 === 0 ? one.url : two.url;
        const source = await api(base, 'POST', '/api/v1/sources', {
          key,
          body: { name: `s${i}`, source_type: 'website', domain: `${origin}/page-${i}` },
        });
        expect(source.status).toBe(201);
        sources.push(source.body.id);
        expect((await api(base, 'POST', `/api/v1/sources/${source.body.id}/sync`, { key })).status).toBe(202);
      }
      for (let waited = 0; held.length < 3; waited += 50) {
        if (waited > 30_000) throw new Error(`only ${held.length} crawls held at once after 30 s`);
        await new Promise((r) => setTimeout(r, 50));
      }
      releasing = true;
      for (const answer of held) answer();
      held = [];
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
      expect(asks).toBe(sources.length);
    } finally {
      releasing = true;
      for (const answer of held) answer();
      await new Promise<void>((resolve) => site.close(() => resolve()));
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query("select status, attempts from jobs where tenant_id = 'multi'");
      expect(rows.length).toBeGreaterThanOrEqual(8);
      for (const row of rows) expect(row).toEqual({ status: 'succeeded', attempts: 1 });
    } finally {
      await client.end();
    }
  });

  it('a key revoked or locked on one instance is refused on the other within a second, its event streams ended', async () => {
    const second = () => new Promise((r) => setTimeout(r, 1000));
    const newKey = async () =>
      (
        await api(one.url, 'POST', '/admin/v1/tenants/multi/api-keys', {
          body: { name: 'short-lived', scopes: ALL_SCOPES },
        })
      ).body as { id: string; secret: string };

    // Revoked on one: refused on two, whose cache had just judged it.
    const revoked = await newKey();
    expect((await api(two.url, 'GET', '/api/v1/apps', { key: revoked.secret })).status).toBe(200);
    const stream = await fetch(`${two.url}/api/v1/mcp`, {
      headers: { 'x-api-key': revoked.secret, accept: 'text/event-stream' },
    });
    expect(stream.status).toBe(200);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes(': connected')) text += new TextDecoder().decode((await reader.read()).value);
    expect((await api(one.url, 'POST', `/admin/v1/api-keys/${revoked.id}/revoke`)).status).toBe(200);
    const revokedAt = Date.now();
    await second();
    const refused = await api(two.url, 'GET', '/api/v1/apps', { key: revoked.secret });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('invalid_api_key');
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/: closed: the API key is no longer valid\n\n$/);
    // Within the second and a judging tick; the bound leaves room for a busy machine.
    expect(Date.now() - revokedAt).toBeLessThan(3000);

    // Locked on two: refused on one; unlocked on two: let through on one again.
    const locked = await newKey();
    expect((await api(one.url, 'GET', '/api/v1/apps', { key: locked.secret })).status).toBe(200);
    expect((await api(two.url, 'POST', `/admin/v1/api-keys/${locked.id}/lock`)).status).toBe(200);
    await second();
    expect((await api(one.url, 'GET', '/api/v1/apps', { key: locked.secret })).status).toBe(401);
    expect((await api(two.url, 'POST', `/admin/v1/api-keys/${locked.id}/unlock`)).status).toBe(200);
    await second();
    expect((await api(one.url, 'GET', '/api/v1/apps', { key: locked.secret })).status).toBe(200);
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
