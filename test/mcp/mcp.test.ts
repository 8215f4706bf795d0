// The MCP endpoint (spec: rules 10–11, MCP tools row, MCP concurrency) driven by the SDK's own
// client over a real listener, plus raw JSON-RPC for batches, versions and transport rules.
import http from 'node:http';
import net from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import fc from 'fast-check';
import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sha256Hex } from '../../src/lib/ids.js';
import { ExchangePool } from '../../src/mcp/exchange.js';
import { bindArguments, buildTools } from '../../src/mcp/tools.js';
import { OPERATIONS } from '../../src/operations/index.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let base: string;
let key: string;

beforeAll(async () => {
  t = await startTestApp({ SSE_HEARTBEAT_MS: '150', MCP_ALLOWED_ORIGINS: 'https://inspector.example' });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  ({ key } = await t.tenant());
});
afterAll(() => t.close());

async function connect(apiKey: string) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/api/v1/mcp`), {
    requestInit: { headers: { 'X-API-Key': apiKey } },
  });
  await client.connect(transport);
  return client;
}

const rpc = (body: unknown, headers: Record<string, string> = {}, apiKey = key) =>
  fetch(`${base}/api/v1/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': apiKey,
      ...headers,
    },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });

// biome-ignore lint/suspicious/noExplicitAny: raw JSON-RPC answers are read loosely.
const json = (response: Response): Promise<any> => response.json();

/**
 * A tool error's spec error object, read from its JSON text: an error carries no
 * `structuredContent`, which would have to match the tool's `outputSchema`.
 */
// biome-ignore lint/suspicious/noExplicitAny: raw tool results are read loosely.
function errorOf(result: any) {
  expect(result.isError).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  return JSON.parse(result.content[0].text).error;
}

const initialize = (protocolVersion: string, id = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

describe('MCP over the SDK client', () => {
  it('initializes, lists tools and calls tools of each area with structured results', async () => {
    const client = await connect(key);
    try {
      expect(client.getServerVersion()?.name).toBe('workspace-api');
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name);
      expect(names).toEqual(
        expect.arrayContaining(['create_app', 'list_apps', 'commit_app_files', 'set_workflow_enabled']),
      );
      for (const op of OPERATIONS) expect(names).toContain(op.id.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
      // The spec's named tools (MCP tools row), with exactly these names.
      expect(names).toEqual(
        expect.arrayContaining([
          'upsert_user',
          'add_user_permissions',
          'remove_user_permission',
          'list_knowledge_update_requests',
          'get_knowledge_update_request',
          'review_knowledge_update_request',
          'resolve_knowledge_update_request',
          'apply_knowledge_update_request',
        ]),
      );

      const app = await client.callTool({ name: 'create_app', arguments: { name: 'from-mcp' } });
      expect(app.isError).toBeFalsy();
      expect(app.structuredContent).toMatchObject({ object: 'app', name: 'from-mcp' });
      expect(JSON.parse((app.content as { text: string }[])[0]?.text ?? '')).toMatchObject({ name: 'from-mcp' });

      const commit = await client.callTool({
        name: 'commit_app_files',
        arguments: { name: 'from-mcp', message: 'via mcp', files: [{ path: 'a.md', content: '# a' }] },
      });
      expect(commit.structuredContent).toMatchObject({
        object: 'app_commit',
        files: [{ path: 'a.md', change: 'added' }],
      });

      const wf = await client.callTool({ name: 'create_workflow', arguments: { name: 'mcp-flow' } });
      const id = (wf.structuredContent as { id: string }).id;
      const enabled = await client.callTool({
        name: 'set_workflow_enabled',
        arguments: { workflow_id: id, enabled: true },
      });
      expect(enabled.structuredContent).toMatchObject({ id, enabled: true });
      // The REST face sees the same state.
      expect((await t.call({ url: `/api/v1/workflows/${id}`, key })).body.enabled).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('tools carry annotations from their operations', async () => {
    const client = await connect(key);
    try {
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      expect(byName.get('list_apps')?.annotations).toMatchObject({ readOnlyHint: true });
      expect(byName.get('delete_app')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
      expect(byName.get('set_workflow_enabled')?.annotations).toMatchObject({
        idempotentHint: true,
        destructiveHint: false,
      });
      expect(byName.get('create_app')?.description).toContain('scope apps:write');
    } finally {
      await client.close();
    }
  });

  it('tools/list shows only the tools the key may call; another tool is a tool error with insufficient_scope', async () => {
    const { key: readOnly } = await t.tenant(['apps:read']);
    const client = await connect(readOnly);
    try {
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      expect(names).toContain('list_apps');
      expect(names).not.toContain('create_app');
      expect(names).not.toContain('list_workflows');
      const denied = await client.callTool({ name: 'create_app', arguments: { name: 'nope' } });
      expect(errorOf(denied)).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
      expect((await t.call({ url: '/api/v1/apps', key: readOnly })).body.data).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it("a tool error reaches a client that checks results against the tools' output schemas", async () => {
    const client = await connect(key);
    try {
      // Listing the tools makes the SDK's client check each result against its tool's outputSchema.
      const { tools } = await client.listTools();
      expect(tools.find((tool) => tool.name === 'get_app')?.outputSchema).toBeDefined();
      const unknown = await client.callTool({ name: 'get_app', arguments: { name: 'no-such-app' } });
      expect(errorOf(unknown)).toMatchObject({ code: 'not_found', param: 'name' });
      const bad = await client.callTool({ name: 'create_app', arguments: { name: '' } });
      expect(errorOf(bad)).toMatchObject({ code: 'validation_error', param: 'name' });
    } finally {
      await client.close();
    }
  });

  it('validation and domain errors come back as tool errors with the spec error body', async () => {
    const client = await connect(key);
    try {
      const bad = await client.callTool({ name: 'create_app', arguments: { name: '' } });
      expect(errorOf(bad)).toMatchObject({ code: 'validation_error', param: 'name' });
      const missing = await client.callTool({
        name: 'commit_app_files',
        arguments: { name: 'from-mcp', message: 'm' },
      });
      expect(errorOf(missing)).toMatchObject({ code: 'missing_required_parameter', param: 'files' });
      const unknown = await client.callTool({ name: 'get_app', arguments: { name: 'no-such-app' } });
      expect(errorOf(unknown)).toMatchObject({ code: 'not_found', param: 'name' });
      const noPath = await client.callTool({ name: 'get_app', arguments: {} });
      expect(errorOf(noPath)).toMatchObject({ code: 'missing_required_parameter', param: 'name' });
      const extra = await client.callTool({ name: 'list_apps', arguments: { bogus: 1 } });
      expect(errorOf(extra)).toMatchObject({ code: 'validation_error', param: 'bogus' });
      await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(/Unknown tool/);
    } finally {
      await client.close();
    }
  });
});

describe('Idempotency-Key over MCP', () => {
  it('a repeat replays the answer; the request is known by its text, not byte by byte', async () => {
    const { tenantId, key: k } = await t.tenant();
    const text =
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_app","arguments":{"name":"idem"}}}';
    const send = () => rpc(text, { 'idempotency-key': 'mcp-once' }, k);
    const first = await json(await send());
    const again = await send();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await json(again)).toEqual(first);
    const stored = await t.database.db
      .selectFrom('idempotency_keys')
      .select('request_hash')
      .where('tenant_id', '=', tenantId)
      .where('key', '=', 'mcp-once')
      .executeTakeFirstOrThrow();
    const { id: keyId } = await t.database.db
      .selectFrom('api_keys')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .executeTakeFirstOrThrow();
    // The key's id and the hash of the body's text (as JSON): a hash of a Buffer's indices would
    // cost seconds for a body of megabytes.
    expect(stored.request_hash).toBe(sha256Hex(`${keyId} POST /api/v1/mcp\n${JSON.stringify(text)}`));
  });
});

describe('MCP tool errors as over REST', () => {
  const call = (id: number, name: string, args: string) =>
    rpc(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`);

  it('an argument that cannot be stored (NUL, lone surrogate, 1e400) is a validation_error naming it, for its request', async () => {
    for (const [args, param] of [
      ['{"name":"a\\u0000b"}', 'name'],
      ['{"name":"a\\ud800b"}', 'name'],
      ['{"name":"ok","description":1e400}', 'description'],
    ] as const) {
      const answer = await call(9, 'create_app', args);
      expect(answer.status).toBe(200);
      const body = await json(answer);
      expect(body.id).toBe(9);
      expect(errorOf(body.result), JSON.stringify(body)).toMatchObject({ code: 'validation_error', param });
    }
    // Outside a tool's arguments, such text is the transport's refusal, whatever the arguments hold.
    for (const body of [
      '{"jsonrpc":"2.0","id":9,"method":"tools/li\\u0000st"}',
      '{"jsonrpc":"2.0","id":"x\\u0000","method":"tools/call","params":{"name":"create_app","arguments":{"name":"\\u0000"}}}',
      '{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call","params":{"name":"create_app","arguments":{"name":"\\u0000"}}}',
    ]) {
      const refused = await rpc(body);
      expect(refused.status, body).toBe(400);
      expect(await json(refused)).toMatchObject({ id: null, error: { code: -32600 } });
    }
    // So is a __proto__ key, anywhere: the SDK's copy of the arguments would make it a prototype.
    for (const args of [
      '{"name":"p","__proto__":{"description":"x"}}',
      '{"name":"q","description":{"constructor":{"prototype":{}}}}',
    ]) {
      const refused = await call(5, 'create_app', args);
      expect(refused.status, args).toBe(400);
      expect(await json(refused)).toMatchObject({
        id: null,
        error: { code: -32600, message: expect.stringContaining('not accepted') },
      });
    }
    // Nesting past the bound is the transport's refusal, arguments included (the SDK walks them).
    const deep = `${'{"a":'.repeat(70)}1${'}'.repeat(70)}`;
    const nested = await call(4, 'create_app', `{"name":"n","description":${deep}}`);
    expect(nested.status).toBe(400);
    expect(await json(nested)).toMatchObject({ id: null, error: { code: -32600 } });
  });

  it('a statement the database refuses is the tool error REST answers, not internal_error', async () => {
    const listApps = t.services.apps.listApps;
    const refusals = [
      ['22P05', 'validation_error'],
      ['23505', 'conflict'],
      ['23503', 'invalid_parameters'],
    ] as const;
    try {
      for (const [state, code] of refusals) {
        t.services.apps.listApps = async () => {
          throw Object.assign(new Error('refused by the database'), { code: state });
        };
        const rest = await t.call({ url: '/api/v1/apps', key });
        expect(rest.body.error.code).toBe(code);
        const body = await json(await call(3, 'list_apps', '{}'));
        expect(errorOf(body.result).code).toBe(code);
        expect(errorOf(body.result).event_id).toBeUndefined();
      }
    } finally {
      t.services.apps.listApps = listApps;
    }
  });
});

describe('MCP transport rules', () => {
  it('authenticates before any JSON-RPC: 401 with the spec error body', async () => {
    const none = await fetch(`${base}/api/v1/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initialize('2025-06-18')),
    });
    expect(none.status).toBe(401);
    expect((await json(none)).error.code).toBe('not_authenticated');
    const bad = await rpc(initialize('2025-06-18'), {}, 'wsk_wrong');
    expect(bad.status).toBe(401);
    expect((await json(bad)).error.code).toBe('invalid_api_key');
  });

  it.each(['2025-03-26', '2025-06-18', '2025-11-25'])('negotiates protocol version %s', async (version) => {
    const r = await rpc(initialize(version));
    expect(r.status).toBe(200);
    const body = (await r.json()) as { result: { protocolVersion: string } };
    expect(body.result.protocolVersion).toBe(version);
    const ping = await rpc({ jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-protocol-version': version });
    expect((await ping.json()) as unknown).toMatchObject({ jsonrpc: '2.0', id: 2, result: {} });
  });

  it('takes a JSON-RPC batch under 2025-03-26 and refuses one under 2025-06-18', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    ];
    const ok = await rpc(batch, { 'mcp-protocol-version': '2025-03-26' });
    expect(ok.status).toBe(200);
    const answers = await json(ok);
    expect(Array.isArray(answers)).toBe(true);
    expect(answers.map((a: { id: number }) => a.id).sort()).toEqual([1, 2]);
    expect(answers.find((a: { id: number }) => a.id === 2).result.tools.length).toBeGreaterThan(0);
    const refused = await rpc(batch, { 'mcp-protocol-version': '2025-06-18' });
    expect(refused.status).toBe(400);
    expect((await json(refused)).error.code).toBe(-32600);
  });

  it('answers a tool call alone (without a server) as a server answers it in a batch, every kind of result', async () => {
    const { key: readOnly } = await t.tenant(['apps:read']);
    const created = await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'one-answer' } });
    expect(created.status).toBe(201);
    const calls: [string, Record<string, unknown>, string?][] = [
      ['get_app', { name: 'one-answer' }],
      ['list_apps', { limit: 1 }],
      ['get_app', { name: 'no-such-app' }],
      ['create_app', { name: '' }],
      ['get_app', {}],
      ['list_apps', { bogus: 1 }],
      ['list_apps', { cursor: 'a\u0000b' }],
      ['create_app', { name: 'denied' }, readOnly],
      ['no_such_tool', {}],
    ];
    // A server is taken from the pool for each exchange a server answers.
    const taken = vi.spyOn(ExchangePool.prototype, 'take');
    try {
      for (const [id, [name, args, apiKey]] of calls.entries()) {
        const call = { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
        const headers = { 'mcp-protocol-version': '2025-03-26' };
        taken.mockClear();
        const alone = await rpc(call, headers, apiKey);
        // Only the unknown tool is left to a server (its JSON-RPC error is the server's).
        expect(taken, name).toHaveBeenCalledTimes(name === 'no_such_tool' ? 1 : 0);
        const batched = await rpc([call], headers, apiKey);
        expect(alone.status).toBe(200);
        expect(batched.status).toBe(200);
        const [inBatch] = await json(batched);
        expect(await alone.text(), name).toBe(JSON.stringify(inBatch));
      }
    } finally {
      taken.mockRestore();
    }
  });

  it('an unsupported MCP-Protocol-Version answers 400', async () => {
    const r = await rpc({ jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '1999-01-01' });
    expect(r.status).toBe(400);
    expect((await json(r)).error).toMatchObject({
      code: -32000,
      message: expect.stringMatching(/^Bad Request: Unsupported protocol version: 1999-01-01/),
    });
    // An initialize names its version in its params instead: the header is not checked then.
    const init = await rpc(initialize('2025-06-18'), { 'mcp-protocol-version': '1999-01-01' });
    expect((await json(init)).result.protocolVersion).toBe('2025-06-18');
  });

  it('keeps the Streamable HTTP transport rules: Accept, batch bound, one initialize, answers in request order', async () => {
    const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' });
    // JSON alone is enough (test/mcp/clients.test.ts); neither JSON nor a stream is not.
    const htmlOnly = await rpc(ping(1), { accept: 'text/html' });
    expect(htmlOnly.status).toBe(406);
    expect((await json(htmlOnly)).error.code).toBe(-32000);
    const old = { 'mcp-protocol-version': '2025-03-26' };
    const big = await rpc(
      Array.from({ length: 101 }, (_, i) => ping(i)),
      old,
    );
    expect(big.status).toBe(400);
    expect((await json(big)).error.message).toMatch(/must not exceed 100/);
    // An initialize in a batch, even alone in one, is refused.
    for (const batch of [[initialize('2025-03-26', 1), ping(2)], [initialize('2025-03-26', 1)]]) {
      const refused = await rpc(batch, old);
      expect(refused.status).toBe(400);
      expect((await json(refused)).error.message).toMatch(/initialize request cannot be sent in a batch/);
    }
    // A batch is answered with an array, even of one answer.
    expect(await json(await rpc([ping(7)], old))).toEqual([{ jsonrpc: '2.0', id: 7, result: {} }]);
    // A request's answer, the notification's none, in the order the requests came.
    const mixed = await rpc(
      [
        ping(3),
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
        ping(1),
      ],
      old,
    );
    expect(mixed.status).toBe(200);
    expect((await json(mixed)).map((a: { id: unknown }) => a.id)).toEqual([3, 'b', 1]);
    // A request its own batch cancels is not answered, and the exchange does not wait for it.
    const cancel = (requestId: number) => ({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId },
    });
    const selfCancelled = await rpc([{ jsonrpc: '2.0', id: 1, method: 'tools/list' }, cancel(1)], old);
    expect(selfCancelled.status).toBe(202);
    const partly = await rpc([ping(1), { jsonrpc: '2.0', id: 2, method: 'tools/list' }, cancel(2)], old);
    const partlyBody = await json(partly);
    expect(partlyBody, JSON.stringify(partlyBody)).toMatchObject([{ id: 1 }]);
    const unknown = await rpc({ jsonrpc: '2.0', id: 7, method: 'resources/list' });
    expect(await json(unknown)).toMatchObject({ id: 7, error: { code: -32601 } });
  });

  it('a notification answers 202 with no body; invalid JSON a JSON-RPC parse error', async () => {
    const r = await rpc(
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { 'mcp-protocol-version': '2025-06-18' },
    );
    expect(r.status).toBe(202);
    expect(await r.text()).toBe('');
    const broken = await rpc('{"jsonrpc":');
    expect(broken.status).toBe(400);
    expect((await json(broken)).error.code).toBe(-32700);
    // Bytes that are not UTF-8 (Latin-1 "é" in a tool's argument) are not JSON text either.
    const latin1 = Buffer.from(
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_task","arguments":{"title":"caf\u00e9"}}}',
      'latin1',
    );
    const notUtf8 = await rpc(latin1);
    expect(notUtf8.status).toBe(400);
    expect(await json(notUtf8)).toMatchObject({
      id: null,
      error: { code: -32700, message: expect.stringContaining('UTF-8') },
    });
    // JSON that is not a JSON-RPC message, or an empty batch: an Invalid Request, answered once.
    for (const body of ['{"foo":1}', '[]', '[1]', '"ping"', '{"jsonrpc":"1.0","id":1,"method":"ping"}']) {
      const invalid = await rpc(body);
      expect(invalid.status, body).toBe(400);
      expect((await json(invalid)).error.code, body).toBe(-32600);
    }
  });

  it('an Origin that is not allowed answers 403; an allowed one passes (DNS-rebinding protection)', async () => {
    const evil = await rpc(initialize('2025-06-18'), { origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect((await json(evil)).error).toMatchObject({ type: 'permission_error', code: 'forbidden_origin' });
    const allowed = await rpc(initialize('2025-06-18'), { origin: 'https://inspector.example' });
    expect(allowed.status).toBe(200);
    // A 403 is not stored under its Idempotency-Key: the same request from an allowed origin runs.
    const keyed = (origin: string) => rpc(initialize('2025-06-18'), { origin, 'idempotency-key': 'origin-check' });
    expect((await keyed('https://evil.example')).status).toBe(403);
    const retried = await keyed('https://inspector.example');
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();

    // The API's own origin passes: the host the request was sent to, when it is one of the API's.
    const { tenantId, key: own } = await t.tenant();
    const call = (host: string, origin: string) =>
      t.call({
        method: 'POST',
        url: '/api/v1/mcp',
        key: own,
        headers: { host, origin, accept: 'application/json, text/event-stream' },
        body: initialize('2025-06-18'),
      });
    for (const host of ['127.0.0.1:8080', 'localhost:8080', `${tenantId}.localhost:8080`, `${tenantId}.localhost.`]) {
      expect((await call(host, `http://${host}`)).status, host).toBe(200);
    }
    // DNS rebinding: the attacker's name points at us, and the page sends it as Origin and as Host.
    const rebound = await call('evil.example:8080', 'http://evil.example:8080');
    expect(rebound.status).toBe(403);
    expect(rebound.body.error.code).toBe('forbidden_origin');
  });

  it.each([undefined, 'some-session'])('GET streams heartbeats (session id %s) and nothing else', async (session) => {
    const controller = new AbortController();
    const r = await fetch(`${base}/api/v1/mcp`, {
      headers: { 'x-api-key': key, accept: 'text/event-stream', ...(session ? { 'mcp-session-id': session } : {}) },
      signal: controller.signal,
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    const started = Date.now();
    while (!text.includes(': heartbeat') && Date.now() - started < 2000) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    controller.abort();
    expect(text).toContain(': heartbeat');
    expect(text).not.toMatch(/^data:/m);
  });

  it('a stream whose key is revoked or locked ends within about a second, between heartbeats, saying why', async () => {
    // Heartbeats a minute apart: the stream's key is judged on a clock of its own, not at a beat.
    const slow = await startTestApp({ SSE_HEARTBEAT_MS: '60000' });
    try {
      await slow.app.listen({ port: 0, host: '127.0.0.1' });
      const address = slow.app.server.address();
      const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v1/mcp`;
      const { tenantId } = await slow.tenant();
      const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      for (const action of ['revoke', 'lock'] as const) {
        const created = await slow.call({
          method: 'POST',
          url: `/admin/v1/tenants/${tenantId}/api-keys`,
          headers: admin,
          body: { name: `stream ${action}`, scopes: ['apps:read'] },
        });
        // Two streams of the key: both end.
        const readers = await Promise.all(
          [0, 1].map(async () => {
            const r = await fetch(url, { headers: { 'x-api-key': created.body.secret, accept: 'text/event-stream' } });
            expect(r.status).toBe(200);
            const reader = (r.body as ReadableStream<Uint8Array>).getReader();
            let text = '';
            while (!text.includes(': connected')) text += new TextDecoder().decode((await reader.read()).value);
            return { reader, text };
          }),
        );
        const changed = await slow.call({
          method: 'POST',
          url: `/admin/v1/api-keys/${created.body.id}/${action}`,
          headers: admin,
        });
        expect(changed.status).toBe(200);
        const started = Date.now();
        for (const stream of readers) {
          for (;;) {
            const { value, done } = await stream.reader.read();
            if (done) break;
            stream.text += new TextDecoder().decode(value);
          }
          expect(stream.text).not.toContain(': heartbeat');
          expect(stream.text).toMatch(/: closed: the API key is no longer valid\n\n$/);
        }
        // Within the key cache's second and one judging tick; the bound leaves room for a busy machine.
        expect(Date.now() - started).toBeLessThan(3000);
      }
    } finally {
      await slow.close();
    }
  });

  it('GET without a key answers 401', async () => {
    const r = await fetch(`${base}/api/v1/mcp`, { headers: { accept: 'text/event-stream' } });
    expect(r.status).toBe(401);
  });
});

describe('MCP event streams per tenant', () => {
  it('a tenant holds at most MCP_MAX_STREAMS_PER_TENANT, over all its keys; another tenant is not held back; a closed stream frees its place', async () => {
    const limited = await startTestApp({ MCP_MAX_STREAMS_PER_TENANT: '2', SSE_HEARTBEAT_MS: '60000' });
    await limited.app.listen({ port: 0, host: '127.0.0.1' });
    const address = limited.app.server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v1/mcp`;
    const open: AbortController[] = [];
    const stream = async (apiKey: string) => {
      const controller = new AbortController();
      open.push(controller);
      const r = await fetch(url, {
        headers: { 'x-api-key': apiKey, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      if (r.status === 200) await (r.body as ReadableStream<Uint8Array>).getReader().read(); // ': connected'
      return { r, controller };
    };
    try {
      const a = await limited.tenant();
      const second = await limited.key(a.tenantId, ['apps:read']);
      const b = await limited.tenant();
      const first = await stream(a.key);
      expect(first.r.status).toBe(200);
      expect((await stream(second)).r.status).toBe(200);
      const refused = await stream(a.key);
      expect(refused.r.status).toBe(429);
      expect(refused.r.headers.get('retry-after')).toBe('5');
      expect(((await refused.r.json()) as { error: { code: string } }).error.code).toBe('concurrency_limit_exceeded');
      expect((await stream(b.key)).r.status).toBe(200);

      first.controller.abort();
      const started = Date.now();
      let again = await stream(a.key);
      while (again.r.status === 429 && Date.now() - started < 2000) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        again = await stream(a.key);
      }
      expect(again.r.status).toBe(200);
    } finally {
      for (const controller of open) controller.abort();
      await limited.close();
    }
  });

  it('a stream asked for by a client that left before the handler ran keeps no place', async () => {
    const limited = await startTestApp(
      { MCP_MAX_STREAMS_PER_TENANT: '1', SSE_HEARTBEAT_MS: '60000' },
      {
        // Widens the window in which the client goes: after the request arrived, before the handler.
        routes: (app) =>
          app.addHook('preHandler', async (request) => {
            if (request.method === 'GET' && request.url === '/api/v1/mcp') await new Promise((r) => setTimeout(r, 100));
          }),
      },
    );
    await limited.app.listen({ port: 0, host: '127.0.0.1' });
    const address = limited.app.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const a = await limited.tenant();
      await new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.write(
            `GET /api/v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${a.key}\r\nAccept: text/event-stream\r\n\r\n`,
          );
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 20);
        });
      });
      await new Promise((r) => setTimeout(r, 400));
      const controller = new AbortController();
      const r = await fetch(`http://127.0.0.1:${port}/api/v1/mcp`, {
        headers: { 'x-api-key': a.key, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      const status = r.status;
      controller.abort();
      expect(status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('MCP concurrency', () => {
  it('with one slot, a request that waits past MCP_SLOT_WAIT_MS gets 429 concurrency_limit_exceeded with Retry-After', async () => {
    const limited = await startTestApp({ MCP_MAX_CONCURRENT: '1', MCP_SLOT_WAIT_MS: '200' });
    await limited.app.listen({ port: 0, host: '127.0.0.1' });
    const address = limited.app.server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v1/mcp`;
    const { key: k } = await limited.tenant(['apps:read']);
    const call = () =>
      fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'x-api-key': k,
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
      // Warm this instance's key cache, so the next requests authenticate without the database.
      expect((await call()).status).toBe(200);
      // A slow tool: a transaction holds the apps table (on PGlite, the whole database) for
      // 800 ms, so list_apps waits on it while holding the only slot.
      const { sql } = await import('kysely');
      const tx = limited.database.db.transaction().execute(async (trx) => {
        await sql`lock table apps in access exclusive mode`.execute(trx);
        await new Promise((r) => setTimeout(r, 800));
      });
      await new Promise((r) => setTimeout(r, 30));
      const slow = call();
      await new Promise((r) => setTimeout(r, 80));
      const refused = await call();
      await tx;
      expect((await slow).status).toBe(200);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      expect((await json(refused)).error).toMatchObject({
        type: 'rate_limit_error',
        code: 'concurrency_limit_exceeded',
      });
    } finally {
      await limited.close();
    }
  });
});

describe('MCP slots across instances', () => {
  it.runIf(Boolean(process.env.TEST_REDIS_URL))('two instances on one Redis share the slots', async () => {
    const { Redis } = await import('ioredis');
    const { createRedisSlots } = await import('../../src/mcp/slots.js');
    const redis = new Redis(process.env.TEST_REDIS_URL as string);
    const slotKey = `test-mcp-slots-${Date.now()}`;
    const one = createRedisSlots(redis, 1, slotKey);
    const two = createRedisSlots(redis, 1, slotKey);
    try {
      const held = await one.acquire('a', 100);
      expect(held).not.toBeNull();
      expect(await two.acquire('b', 150)).toBeNull();
      const waiting = two.acquire('b', 1000);
      await held?.();
      const granted = await waiting;
      expect(granted).not.toBeNull();
      await granted?.();
    } finally {
      await redis.del(slotKey, `${slotKey}:a`, `${slotKey}:b`);
      redis.disconnect();
    }
  });
});

describe('tool input schemas', () => {
  it('for every tool, an input built from its schema passes the tool validation', () => {
    const tools = buildTools(OPERATIONS);
    // biome-ignore lint/suspicious/noExplicitAny: JSON Schema fragments are read loosely.
    const valueFor = (schema: any): unknown => {
      if (schema.anyOf) return valueFor(schema.anyOf[0]);
      if (schema.const !== undefined) return schema.const;
      if (schema.enum) return schema.enum[0];
      switch (schema.type) {
        case 'string': {
          if (schema.format === 'uuid') return '00000000-0000-7000-8000-000000000001';
          if (schema.format === 'date-time') return new Date().toISOString();
          if (schema.format === 'email') return 'someone@example.com';
          if (schema.format === 'uri') return 'https://example.com/x';
          const min = schema.minLength ?? 1;
          const max = schema.maxLength ?? 40;
          const arbitrary = schema.pattern
            ? fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length >= min && s.length <= max)
            : fc.string({ minLength: min, maxLength: Math.min(max, 40) });
          return fc.sample(arbitrary, { numRuns: 1, seed: 42 })[0];
        }
        case 'integer':
        case 'number':
          return schema.minimum ?? 1;
        case 'boolean':
          return true;
        case 'array':
          return Array.from({ length: schema.minItems ?? 0 }, () => valueFor(schema.items ?? {}));
        case 'object': {
          const out: Record<string, unknown> = {};
          for (const name of schema.required ?? []) out[name] = valueFor(schema.properties?.[name] ?? {});
          return out;
        }
        default:
          return 'x';
      }
    };
    expect(tools.size).toBe(OPERATIONS.length);
    for (const tool of tools.values()) {
      const input = valueFor(tool.definition.inputSchema) as Record<string, unknown>;
      expect(() => bindArguments(tool, input), `${tool.definition.name} ${JSON.stringify(input)}`).not.toThrow();
    }
  });
});

describe('MCP event streams while the database is slow or down', () => {
  /** Holds (or fails) the answers of key lookups (selects from api_keys) while set. */
  function keyLookups() {
    let mode: 'pass' | 'hold' | 'fail' = 'pass';
    let open = () => {};
    let gate: Promise<void> = Promise.resolve();
    let held = 0;
    let started = 0;
    const watched = new WeakSet<object>();
    const plugin: KyselyPlugin = {
      transformQuery: (args) => {
        if (
          mode !== 'pass' &&
          args.node.kind === 'SelectQueryNode' &&
          JSON.stringify(args.node).includes('"api_keys"')
        ) {
          watched.add(args.queryId);
          started++;
        }
        return args.node;
      },
      transformResult: async (args) => {
        if (!watched.has(args.queryId)) return args.result;
        if (mode === 'fail') throw Object.assign(new Error('connection terminated'), { code: '57P01' });
        held++;
        await gate;
        held--;
        return args.result;
      },
    };
    return {
      plugin,
      get held() {
        return held;
      },
      get started() {
        return started;
      },
      hold() {
        gate = new Promise<void>((resolve) => (open = resolve));
        mode = 'hold';
      },
      fail() {
        mode = 'fail';
      },
      release() {
        mode = 'pass';
        open();
      },
    };
  }

  async function heartbeatsWhile(lookups: ReturnType<typeof keyLookups>, set: () => void) {
    const app = await startTestApp({ SSE_HEARTBEAT_MS: '100' }, { wrapDb: (db) => db.withPlugin(lookups.plugin) });
    try {
      await app.app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.app.server.address();
      const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v1/mcp`;
      const { key: streamKey } = await app.tenant();
      const controller = new AbortController();
      const r = await fetch(url, {
        headers: { 'x-api-key': streamKey, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      expect(r.status).toBe(200);
      const reader = (r.body as ReadableStream<Uint8Array>).getReader();
      let text = '';
      while (!text.includes(': connected')) text += new TextDecoder().decode((await reader.read()).value);
      const chunks: { at: number; text: string }[] = [];
      let ended = false;
      void (async () => {
        for (;;) {
          const next = await reader.read().catch(() => ({ done: true, value: undefined }));
          if (next.done) {
            ended = true;
            return;
          }
          chunks.push({ at: Date.now(), text: new TextDecoder().decode(next.value) });
        }
      })();
      set();
      // Past the key cache's second: from then on each judgement asks the database.
      const from = Date.now() + 1200;
      await new Promise((resolve) => setTimeout(resolve, 2200));
      text = chunks
        .filter((c) => c.at >= from)
        .map((c) => c.text)
        .join('');
      const wasEnded = ended;
      const result = { beats: text.split(': heartbeat').length - 1, ended: wasEnded, started: lookups.started, text };
      lookups.release();
      controller.abort();
      return result;
    } finally {
      lookups.release();
      await app.close();
    }
  }

  it('key lookups that do not answer hold back no heartbeat, and one stream waits on one lookup at a time', async () => {
    const lookups = keyLookups();
    const { beats, ended, started } = await heartbeatsWhile(lookups, () => lookups.hold());
    expect(ended).toBe(false);
    expect(beats).toBeGreaterThanOrEqual(5);
    expect(started).toBeLessThanOrEqual(1);
  });

  it('a database that fails ends no stream', async () => {
    const lookups = keyLookups();
    const { beats, ended } = await heartbeatsWhile(lookups, () => lookups.fail());
    expect(ended).toBe(false);
    expect(beats).toBeGreaterThanOrEqual(5);
  });

  it('a stream whose key was judged while the server began to close is refused with 503, and holds no close up', async () => {
    const lookups = keyLookups();
    const app = await startTestApp({}, { wrapDb: (db) => db.withPlugin(lookups.plugin) });
    let closed: Promise<void> | undefined;
    try {
      await app.app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.app.server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const { key: streamKey } = await app.tenant();
      lookups.hold();
      // A connection of its own, closed after the answer (no keep-alive to hold the close up).
      const asked = new Promise<{ status: number | undefined; text: string }>((resolve, reject) => {
        http
          .get(
            {
              host: '127.0.0.1',
              port,
              path: '/api/v1/mcp',
              agent: false,
              headers: { 'x-api-key': streamKey, accept: 'text/event-stream' },
            },
            (response) => {
              let text = '';
              response.on('data', (chunk) => {
                text += chunk;
              });
              response.on('end', () => resolve({ status: response.statusCode, text }));
            },
          )
          .on('error', reject);
      });
      while (lookups.held === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      closed = app.close();
      // The close's first step (preClose) has run by the next turns; the key's lookup then answers.
      await new Promise((resolve) => setTimeout(resolve, 50));
      lookups.release();
      const r = await asked;
      expect(r.status).toBe(503);
      expect(JSON.parse(r.text).error.code).toBe('service_unavailable');
      await closed;
    } finally {
      lookups.release();
      if (!closed) await app.close();
    }
  });
});
