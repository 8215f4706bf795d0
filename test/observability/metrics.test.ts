// GET /metrics (docs/operations.md): the operator's Prometheus scrape, behind ADMIN_TOKEN; requests
// counted and timed by operation id, method, status class and transport (REST, and MCP per tool
// call); refusals by reason; the job queue, webhook deliveries, pools and process read at scrape.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { KyselyPlugin, QueryId } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmbeddingsClient, EmbeddingsError } from '../../src/domain/knowledge/embeddings/client.js';
import { ADMIN_TOKEN, expectError, startTestApp, type TestApp } from '../helpers.js';
import { embeddingsServer, failing, MODEL } from '../support/embeddings-server.js';

let t: TestApp;
let key: string;
let tenantId: string;

beforeAll(async () => {
  t = await startTestApp({ BODY_LIMIT_BYTES: '4096', ALLOW_PRIVATE_TARGETS: 'true' });
  ({ key, tenantId } = await t.tenant());
});
afterAll(() => t.close());

const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function scrape(app: TestApp = t): Promise<string> {
  const r = await app.call({ url: '/metrics', headers: operator });
  expect(r.status, r.text).toBe(200);
  expect(r.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return r.text;
}

/** The sum of the samples of `name` whose labels include `labels` (0 when there is none). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = new Map([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([label, value]) => found.get(label) === value)) sum += Number(match[3]);
  }
  return sum;
}

/** What moved between two scrapes for a sample. */
const moved = (before: string, after: string, name: string, labels: Record<string, string>) =>
  sample(after, name, labels) - sample(before, name, labels);

const mcpCall = (apiKey: string, name: string, args: Record<string, unknown> = {}) =>
  t.call({
    method: 'POST',
    url: '/api/v1/mcp',
    key: apiKey,
    headers: { accept: 'application/json, text/event-stream' },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
  });

describe('the /metrics endpoint', () => {
  it('refuses a request without a token: 401 not_authenticated, WWW-Authenticate: Bearer', async () => {
    const r = await t.call({ url: '/metrics' });
    expectError(r, 401, 'not_authenticated');
    expect(r.headers['www-authenticate']).toBe('Bearer realm="workspace-admin"');
  });

  it('refuses a tenant API key, sent as X-API-Key or as a bearer token, and a wrong token', async () => {
    const asKey = await t.call({ url: '/metrics', key });
    expectError(asKey, 401, 'not_authenticated');
    expect(asKey.headers['www-authenticate']).toBe('Bearer realm="workspace-admin"');
    const asBearer = await t.call({ url: '/metrics', headers: { authorization: `Bearer ${key}` } });
    expectError(asBearer, 401, 'invalid_api_key');
    expect(asBearer.headers['www-authenticate']).toBe('Bearer realm="workspace-admin", error="invalid_token"');
    const wrong = await t.call({ url: '/metrics', headers: { authorization: `Bearer ${ADMIN_TOKEN}x` } });
    expectError(wrong, 401, 'invalid_api_key');
    expect(asBearer.text).not.toContain('http_requests_total');
  });

  it('is not there (404) when no ADMIN_TOKEN is set', async () => {
    const bare = await startTestApp({ ADMIN_TOKEN: '' });
    try {
      expectError(await bare.call({ url: '/metrics', headers: operator }), 404, 'not_found');
    } finally {
      await bare.close();
    }
  });

  it('is not in the public OpenAPI document', async () => {
    const r = await t.call({ url: '/api/v1/openapi.json' });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body.paths)).not.toContain('/metrics');
  });

  it('serves the process metrics and the database pool', async () => {
    const text = await scrape();
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(text).toContain('nodejs_eventloop_lag_seconds');
    expect(sample(text, 'db_pool_clients')).toBeGreaterThan(0);
    expect(text).toMatch(/^db_pool_waiting\{database="(pglite|postgres)"\} \d+$/m);
    expect(text).toMatch(/^mcp_slots_in_use \d+$/m);
  });
});

describe('requests', () => {
  it('counts and times REST requests by operation id, method, status class and transport', async () => {
    const before = await scrape();
    for (let i = 0; i < 3; i++) expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    const after = await scrape();
    const labels = { operation: 'listApps', method: 'GET', status_class: '2xx', transport: 'rest' };
    expect(moved(before, after, 'http_requests_total', labels)).toBe(3);
    expect(moved(before, after, 'http_request_duration_seconds_count', labels)).toBe(3);
    expect(moved(before, after, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(3);
    expect(moved(before, after, 'http_request_duration_seconds_sum', labels)).toBeGreaterThan(0);
    // The path's template or id, never the raw path; no tenant as a label.
    expect(after).not.toContain('/api/v1/apps"');
    expect(after).not.toContain(tenantId);
  });

  it('a refused scope counts as a 4xx of the operation and as a refusal with reason insufficient_scope', async () => {
    const readOnly = await t.key(tenantId, ['tasks:read']);
    const before = await scrape();
    expectError(await t.call({ url: '/api/v1/apps', key: readOnly }), 403, 'insufficient_scope');
    const after = await scrape();
    const labels = { operation: 'listApps', method: 'GET', status_class: '4xx', transport: 'rest' };
    expect(moved(before, after, 'http_requests_total', labels)).toBe(1);
    expect(
      moved(before, after, 'http_requests_refused_total', { reason: 'insufficient_scope', transport: 'rest' }),
    ).toBe(1);
  });

  it('a body over the limit counts as a refusal with reason request_too_large', async () => {
    const before = await scrape();
    const r = await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'x'.repeat(10_000) } });
    expectError(r, 413, 'request_too_large');
    const after = await scrape();
    expect(
      moved(before, after, 'http_requests_refused_total', { reason: 'request_too_large', transport: 'rest' }),
    ).toBe(1);
    expect(
      moved(before, after, 'http_requests_total', { operation: 'createApp', method: 'POST', status_class: '4xx' }),
    ).toBe(1);
  });

  it('a request over the rate limit counts as a refusal with reason rate_limit_exceeded', async () => {
    const limited = await startTestApp({ RATE_LIMIT_PER_MINUTE: '2' });
    try {
      const before = await scrape();
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await limited.call({ url: '/healthz' })).status);
      // /healthz is not limited; a path with no route counts against the global budget.
      for (let i = 0; i < 3; i++) statuses.push((await limited.call({ url: '/api/v1/nothing-here' })).status);
      expect(statuses).toEqual([200, 200, 200, 404, 404, 429]);
      const after = await scrape();
      expect(
        moved(before, after, 'http_requests_refused_total', { reason: 'rate_limit_exceeded', transport: 'rest' }),
      ).toBe(1);
      expect(
        moved(before, after, 'http_requests_total', { operation: 'unmatched', method: 'GET', status_class: '4xx' }),
      ).toBe(3);
      expect(after).not.toContain('nothing-here');
    } finally {
      await limited.close();
    }
  });

  it('counts MCP tool calls under the operation id of the tool, transport mcp, and their refusals', async () => {
    const readOnly = await t.key(tenantId, ['tasks:read']);
    const before = await scrape();
    const ok = await mcpCall(key, 'list_apps');
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.result.isError).toBeFalsy();
    const refused = await mcpCall(readOnly, 'list_apps');
    expect(refused.body.result.isError).toBe(true);
    const after = await scrape();
    const mcp = { operation: 'listApps', method: 'tools/call', transport: 'mcp' };
    expect(moved(before, after, 'http_requests_total', { ...mcp, status_class: '2xx' })).toBe(1);
    expect(moved(before, after, 'http_requests_total', { ...mcp, status_class: '4xx' })).toBe(1);
    expect(moved(before, after, 'http_request_duration_seconds_count', { ...mcp, status_class: '2xx' })).toBe(1);
    expect(
      moved(before, after, 'http_requests_refused_total', { reason: 'insufficient_scope', transport: 'mcp' }),
    ).toBe(1);
    // The HTTP exchange itself counts as a REST request to the MCP endpoint.
    expect(moved(before, after, 'http_requests_total', { operation: 'mcpPost', transport: 'rest' })).toBe(2);
    // Slots are given back once the exchanges end.
    expect(sample(after, 'mcp_slots_in_use')).toBe(0);
  });
});

describe('MCP slots', () => {
  it('counts the slots held while tool calls run, and none once they end', async () => {
    // Reads of `apps` wait at this gate while it is held, so a call keeps its slot meanwhile.
    let gate: Promise<void> | undefined;
    let open = () => {};
    const held = new WeakSet<QueryId>();
    const plugin: KyselyPlugin = {
      transformQuery: (args) => {
        if (gate && JSON.stringify(args.node).includes('"apps"')) held.add(args.queryId);
        return args.node;
      },
      transformResult: async (args) => {
        if (held.has(args.queryId)) await gate;
        return args.result;
      },
    };
    const gated = await startTestApp({}, { wrapDb: (db) => db.withPlugin(plugin) });
    try {
      const { key: gatedKey } = await gated.tenant();
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      const call = gated.call({
        method: 'POST',
        url: '/api/v1/mcp',
        key: gatedKey,
        headers: { accept: 'application/json, text/event-stream' },
        body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_apps', arguments: {} } },
      });
      let inUse = 0;
      for (let i = 0; i < 400 && inUse === 0; i++) {
        inUse = sample(await scrape(gated), 'mcp_slots_in_use');
        if (inUse === 0) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(inUse).toBe(1);
      open();
      gate = undefined;
      expect((await call).status).toBe(200);
      expect(sample(await scrape(gated), 'mcp_slots_in_use')).toBe(0);
    } finally {
      open();
      await gated.close();
    }
  });
});

describe('background work', () => {
  it('reports queued jobs and the age of the oldest due one by kind, read at scrape time', async () => {
    // A fresh app: the queue's figures are kept a few seconds per database.
    const fresh = await startTestApp();
    try {
      const { tenantId: owner } = await fresh.tenant();
      const runAt = new Date(Date.now() - 60_000);
      for (let i = 0; i < 2; i++) {
        await fresh.jobs.enqueue(fresh.database.db, { kind: 'metrics-probe', tenantId: owner, runAt });
      }
      // Not due yet: not counted as waiting.
      await fresh.jobs.enqueue(fresh.database.db, {
        kind: 'metrics-probe',
        tenantId: owner,
        runAt: new Date(Date.now() + 3_600_000),
      });
      const text = await scrape(fresh);
      expect(sample(text, 'jobs_queued', { kind: 'metrics-probe' })).toBe(2);
      expect(sample(text, 'jobs_oldest_queued_age_seconds', { kind: 'metrics-probe' })).toBeGreaterThanOrEqual(59);
      expect(sample(text, 'jobs_running', { kind: 'metrics-probe' })).toBe(0);
    } finally {
      await fresh.close();
    }
  });

  it('counts job runs by kind and outcome', async () => {
    let fail = true;
    t.jobs.register('metrics-outcome', async () => {
      if (fail) throw new Error('the probe fails once');
    });
    const before = await scrape();
    await t.jobs.enqueue(t.database.db, { kind: 'metrics-outcome', tenantId, maxAttempts: 1 });
    await t.jobs.runUntilIdle();
    fail = false;
    await t.jobs.enqueue(t.database.db, { kind: 'metrics-outcome', tenantId });
    await t.jobs.runUntilIdle();
    const after = await scrape();
    expect(moved(before, after, 'jobs_finished_total', { kind: 'metrics-outcome', outcome: 'failed' })).toBe(1);
    expect(moved(before, after, 'jobs_finished_total', { kind: 'metrics-outcome', outcome: 'succeeded' })).toBe(1);
    expect(moved(before, after, 'job_run_duration_seconds_count', { kind: 'metrics-outcome' })).toBe(2);
  });

  it('counts webhook deliveries by outcome, with their duration', async () => {
    const statuses = [200, 500];
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(statuses.shift() ?? 200).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.address() as AddressInfo;
    try {
      const { tenantId: owner, key: ownerKey } = await t.tenant();
      const endpoint = await t.call({
        method: 'POST',
        url: '/api/v1/webhook-endpoints',
        key: ownerKey,
        body: { url: `http://127.0.0.1:${port}/hooks`, events: ['*'] },
      });
      expect(endpoint.status, endpoint.text).toBe(201);
      const before = await scrape();
      const at = new Date().toISOString();
      const user = { object: 'user' as const, id: 'u1', email: 'a@example.com', name: 'A', role: 'agent' };
      const data = { user: { ...user, permissions: [], created_at: at, updated_at: at }, added: [], removed: [] };
      for (let i = 0; i < 2; i++) {
        await t.database.db.transaction().execute(async (trx) => {
          await t.services.emitEvent(trx, owner, 'user.permissions.changed', data);
        });
        await t.jobs.runUntilIdle();
      }
      const after = await scrape();
      expect(moved(before, after, 'webhook_deliveries_total', { outcome: 'succeeded' })).toBe(1);
      expect(moved(before, after, 'webhook_deliveries_total', { outcome: 'failed_status' })).toBe(1);
      expect(moved(before, after, 'webhook_delivery_duration_seconds_count', {})).toBe(2);
    } finally {
      receiver.closeAllConnections();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});

describe('embeddings', () => {
  it('counts requests to the embeddings server by outcome', async () => {
    const server = await embeddingsServer();
    try {
      const client = createEmbeddingsClient({ baseUrl: server.url, model: MODEL, timeoutMs: 5_000 });
      const before = await scrape();
      await client.embed(['a passage']);
      server.answer(failing);
      await expect(client.embed(['a passage'], { retries: 0 })).rejects.toThrow(EmbeddingsError);
      const after = await scrape();
      expect(moved(before, after, 'embeddings_requests_total', { outcome: 'succeeded' })).toBe(1);
      expect(moved(before, after, 'embeddings_requests_total', { outcome: 'rejected' })).toBe(1);
    } finally {
      await server.close();
    }
  });
});

describe('the request log', () => {
  it('writes one JSON line per request with its request id, operation id, tenant, status and duration', async () => {
    const lines: string[] = [];
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    const logged = await startTestApp({ LOG_LEVEL: 'info' }, { logStream });
    try {
      const { tenantId: owner, key: ownerKey } = await logged.tenant();
      const r = await logged.call({ url: '/api/v1/apps', key: ownerKey });
      expect(r.status).toBe(200);
      const requestId = r.headers['x-request-id'];
      const entries = lines.map((line) => JSON.parse(line)).filter((entry) => entry.reqId === requestId);
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        msg: 'request completed',
        operation_id: 'listApps',
        tenant: owner,
        status: 200,
        req: { method: 'GET', url: '/api/v1/apps' },
      });
      expect(entries[0].duration_ms).toBeGreaterThan(0);
      expect(entries[0]).not.toHaveProperty('trace_id');
      // A path with no route: its fixed name, and the URL as logged without its secrets.
      const lost = await logged.call({ url: '/api/v1/nowhere?token=secret-in-query' });
      const [unmatched] = lines.map((line) => JSON.parse(line)).filter((e) => e.reqId === lost.headers['x-request-id']);
      expect(unmatched).toMatchObject({ operation_id: 'unmatched', tenant: null, status: 404 });
      expect(unmatched.req.url).toBe('/api/v1/nowhere?token=[redacted]');
      expect(lines.join('\n')).not.toContain(ownerKey);
      expect(lines.join('\n')).not.toContain('secret-in-query');
    } finally {
      await logged.close();
    }
  });
});
