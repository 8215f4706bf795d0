// What MCP clients meet on connecting (docs/mcp.md, Connecting a client): a 401 says how to
// authenticate (WWW-Authenticate), the key may come as a bearer token, and a plain JSON-RPC client
// that accepts JSON (or anything) gets JSON, while one that prefers a stream gets events. Over a
// real listener, with the SDK's own client where a client is meant.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerFormat } from '../../src/mcp/exchange.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let base: string;
let key: string;
let tenantId: string;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

beforeAll(async () => {
  t = await startTestApp({ SSE_HEARTBEAT_MS: '150' });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  ({ key, tenantId } = await t.tenant());
});
afterAll(() => t.close());

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'plain', version: '1' } },
};
const listApps = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_apps', arguments: {} } };
const listTools = { jsonrpc: '2.0', id: 3, method: 'tools/list' };

/** A POST to the MCP endpoint with exactly these headers (and a JSON content type). */
const post = (body: unknown, headers: Record<string, string>) =>
  fetch(`${base}/api/v1/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

/** The SDK's client, its requests sent with `headers`, and their Accept replaced when `accept` is given. */
async function sdkClient(headers: Record<string, string>, accept?: string) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/api/v1/mcp`), {
    requestInit: { headers },
    ...(accept === undefined
      ? {}
      : {
          fetch: (url: string | URL, init?: RequestInit) => {
            const sent = new Headers(init?.headers);
            sent.set('accept', accept);
            return fetch(url, { ...init, headers: sent });
          },
        }),
  });
  await client.connect(transport);
  return client;
}

describe('a 401 says how to authenticate', () => {
  it('on the MCP endpoint: a bearer token or X-API-Key, and invalid_token for a key refused', async () => {
    const none = await post(initialize, { accept: 'application/json' });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe(
      'Bearer realm="workspace-api", ApiKey realm="workspace-api", header="X-API-Key"',
    );
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('not_authenticated');
    const wrong = await post(initialize, { accept: 'application/json', authorization: 'Bearer wsk_wrong' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe(
      'Bearer realm="workspace-api", error="invalid_token", ApiKey realm="workspace-api", header="X-API-Key"',
    );
    const stream = await fetch(`${base}/api/v1/mcp`, { headers: { accept: 'text/event-stream' } });
    expect(stream.status).toBe(401);
    expect(stream.headers.get('www-authenticate')).toMatch(/^Bearer realm="workspace-api"/);
  });

  it('on REST, the X-API-Key header; on the control plane, the operator token', async () => {
    const rest = await t.call({ url: '/api/v1/apps' });
    expect(rest.status).toBe(401);
    expect(rest.headers['www-authenticate']).toBe('ApiKey realm="workspace-api", header="X-API-Key"');
    const invalid = await t.call({ url: '/api/v1/apps', key: 'wsk_wrong' });
    expect(invalid.headers['www-authenticate']).toBe('ApiKey realm="workspace-api", header="X-API-Key"');
    const control = await t.call({ url: '/admin/v1/tenants' });
    expect(control.status).toBe(401);
    expect(control.headers['www-authenticate']).toBe('Bearer realm="workspace-admin"');
    const refused = await t.call({ url: '/admin/v1/tenants', headers: { authorization: 'Bearer not-the-token' } });
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="workspace-admin", error="invalid_token"');
    // Other answers carry no challenge.
    expect((await t.call({ url: '/api/v1/apps', key })).headers['www-authenticate']).toBeUndefined();
  });
});

describe('the key as a bearer token on the MCP endpoint', () => {
  it("the SDK's client connects with Authorization: Bearer alone, under the key's scopes", async () => {
    const client = await sdkClient({ authorization: `Bearer ${key}` });
    try {
      const created = await client.callTool({ name: 'create_app', arguments: { name: 'by-bearer' } });
      expect(created.structuredContent).toMatchObject({ object: 'app', name: 'by-bearer' });
    } finally {
      await client.close();
    }
    const readOnly = await t.key(tenantId, ['apps:read']);
    const limited = await sdkClient({ authorization: `bearer ${readOnly}` });
    try {
      const names = (await limited.listTools()).tools.map((tool) => tool.name);
      expect(names).toContain('list_apps');
      expect(names).not.toContain('create_app');
      const denied = await limited.callTool({ name: 'create_app', arguments: { name: 'denied' } });
      expect(denied.isError).toBe(true);
      expect(JSON.parse((denied.content as { text: string }[])[0]?.text ?? '').error.code).toBe('insufficient_scope');
    } finally {
      await limited.close();
    }
  });

  it('an invalid bearer key answers the error body X-API-Key gets; the same key both ways is one key', async () => {
    const viaBearer = await post(listApps, { accept: 'application/json', authorization: 'Bearer wsk_wrong' });
    const viaHeader = await post(listApps, { accept: 'application/json', 'x-api-key': 'wsk_wrong' });
    expect(viaBearer.status).toBe(401);
    const bearerBody = (await viaBearer.json()) as { error: Record<string, unknown> };
    expect(bearerBody).toEqual(await viaHeader.json());
    expect(bearerBody.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
    const both = await post(listApps, { accept: 'application/json', authorization: `Bearer ${key}`, 'x-api-key': key });
    expect(both.status).toBe(200);
    expect(((await both.json()) as { result: { isError?: boolean } }).result.isError).toBeUndefined();
  });

  it('two different keys, one in each header, are refused naming both, even when either is valid', async () => {
    const other = await t.key(tenantId, ['apps:read']);
    for (const [bearer, header] of [
      [key, other],
      [key, 'wsk_wrong'],
      ['wsk_wrong', key],
    ]) {
      const r = await post(listApps, {
        accept: 'application/json',
        authorization: `Bearer ${bearer}`,
        'x-api-key': header as string,
      });
      expect(r.status).toBe(401);
      const { error } = (await r.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('not_authenticated');
      expect(error.message).toMatch(/Two different API keys.*X-API-Key.*Authorization: Bearer/);
    }
  });

  it('an Authorization of another scheme is no key; REST takes the key in X-API-Key only', async () => {
    const basic = await post(listApps, { accept: 'application/json', authorization: `Basic ${key}` });
    expect(basic.status).toBe(401);
    const { error } = (await basic.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('not_authenticated');
    expect(error.message).toContain('Authorization: Bearer');
    const rest = await t.call({ url: '/api/v1/apps', headers: { authorization: `Bearer ${key}` } });
    expect(rest.status).toBe(401);
    expect(rest.body.error.code).toBe('not_authenticated');
  });

  it('an event stream opened with a bearer key lives while the key does, and ends when it is revoked', async () => {
    const created = await t.call({
      method: 'POST',
      url: `/admin/v1/tenants/${tenantId}/api-keys`,
      headers: admin,
      body: { name: 'bearer stream', scopes: ['apps:read'] },
    });
    expect(created.status).toBe(201);
    const r = await fetch(`${base}/api/v1/mcp`, {
      headers: { authorization: `Bearer ${created.body.secret}`, accept: 'text/event-stream' },
    });
    expect(r.status).toBe(200);
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    // The key is judged again every 50 ms: two heartbeats (150 ms apart) mean it was judged valid.
    while (text.split(': heartbeat').length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).not.toContain(': closed');
    const revoked = await t.call({
      method: 'POST',
      url: `/admin/v1/api-keys/${created.body.id}/revoke`,
      headers: admin,
    });
    expect(revoked.status).toBe(200);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/: closed: the API key is no longer valid\n\n$/);
  });
});

describe('Accept', () => {
  it.each([['application/json'], ['*/*'], ['application/*'], [undefined]])(
    'a plain JSON-RPC client sending Accept %s gets JSON, from a server and without one',
    async (accept) => {
      const headers: Record<string, string> = { 'x-api-key': key, ...(accept === undefined ? {} : { accept }) };
      for (const message of [initialize, listApps, listTools, [listTools, listApps]]) {
        const r = await post(message, { ...headers, 'mcp-protocol-version': '2025-03-26' });
        expect(r.status, JSON.stringify(message)).toBe(200);
        expect(r.headers.get('content-type')).toMatch(/^application\/json/);
        const body = (await r.json()) as unknown;
        for (const answer of Array.isArray(body) ? body : [body])
          expect(answer).toMatchObject({ jsonrpc: '2.0', result: {} });
      }
    },
  );

  it('a request with no Accept header at all gets JSON', async () => {
    // fetch sends `Accept: */*` when none is given; an injected request sends none.
    const r = await t.call({ method: 'POST', url: '/api/v1/mcp', key, body: listApps });
    expect(r.status).toBe(200);
    expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
    expect(r.body).toMatchObject({ jsonrpc: '2.0', id: 2, result: { structuredContent: { object: 'list' } } });
  });

  it('a client that ranks the stream first gets the same answers as Server-Sent Events, one message event each', async () => {
    for (const accept of ['text/event-stream', 'application/json;q=0.5, text/event-stream']) {
      for (const message of [listApps, listTools, [listTools, listApps]]) {
        const headers = { 'x-api-key': key, 'mcp-protocol-version': '2025-03-26' };
        const asJson = (await (await post(message, { ...headers, accept: 'application/json' })).json()) as unknown;
        const r = await post(message, { ...headers, accept });
        expect(r.status).toBe(200);
        expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
        const expected = (Array.isArray(asJson) ? asJson : [asJson])
          .map((answer) => `event: message\ndata: ${JSON.stringify(answer)}\n\n`)
          .join('');
        expect(await r.text()).toBe(expected);
      }
    }
    // A notification is still 202 with no body.
    const note = await post(
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { 'x-api-key': key, accept: 'text/event-stream' },
    );
    expect(note.status).toBe(202);
    expect(await note.text()).toBe('');
  });

  it("the SDK's client reads the stream answers as its own transport's", async () => {
    const client = await sdkClient({ 'x-api-key': key }, 'text/event-stream');
    try {
      expect(client.getServerVersion()?.name).toBe('workspace-api');
      const { tools } = await client.listTools();
      expect(tools.length).toBeGreaterThan(10);
      const apps = await client.callTool({ name: 'list_apps', arguments: {} });
      expect(apps.structuredContent).toMatchObject({ object: 'list' });
    } finally {
      await client.close();
    }
  });

  it('an Accept that takes neither JSON nor a stream answers 406 in JSON-RPC terms', async () => {
    for (const accept of ['text/html', 'application/json;q=0, text/event-stream;q=0', 'image/*']) {
      const r = await post(listApps, { 'x-api-key': key, accept });
      expect(r.status, accept).toBe(406);
      expect(await r.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });
    }
  });

  it('answerFormat reads media ranges and their q', () => {
    expect(answerFormat(undefined)).toBe('json');
    expect(answerFormat('  ')).toBe('json');
    expect(answerFormat('application/json, text/event-stream')).toBe('json');
    expect(answerFormat('text/event-stream, application/json')).toBe('json');
    expect(answerFormat('Text/Event-Stream')).toBe('event-stream');
    expect(answerFormat('text/*')).toBe('event-stream');
    expect(answerFormat('text/event-stream;q=0.9, application/json;q=0.8')).toBe('event-stream');
    expect(answerFormat('text/event-stream;q=0.8, */*;q=0.9')).toBe('json');
    expect(answerFormat('text/event-stream;q=2')).toBeUndefined();
    expect(answerFormat('text/plain')).toBeUndefined();
  });
});
