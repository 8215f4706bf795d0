// A stored answer belongs to the API key that made it: another key of the same tenant, sending the
// same Idempotency-Key and body, is never given it (it may hold other scopes), over REST and MCP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let tenantId: string;
let everything: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ tenantId, key: everything } = await t.tenant());
});
afterAll(() => t.close());

describe('a stored answer belongs to the key that made it', () => {
  it('REST: another key with the same Idempotency-Key and body answers 409, not the stored answer', async () => {
    const other = await t.key(tenantId, ['tasks:write']);
    const send = (key: string) =>
      t.call({
        method: 'POST',
        url: '/api/v1/tasks',
        key,
        headers: { 'idempotency-key': 'rest-k' },
        body: { title: 'one' },
      });
    const first = await send(everything);
    expect(first.status).toBe(201);
    const again = await send(everything);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const stranger = await send(other);
    expectError(stranger, 409, 'conflict', 'Idempotency-Key');
    expect(stranger.headers['idempotent-replayed']).toBeUndefined();
  });

  it("MCP: a key without the tool's scope is not given another key's stored list of users", async () => {
    const appsOnly = await t.key(tenantId, ['apps:read']);
    const body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_users","arguments":{}}}';
    const send = (key: string) =>
      t.call({
        method: 'POST',
        url: '/api/v1/mcp',
        key,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'idempotency-key': 'mcp-k',
        },
        body,
      });
    const first = await send(everything);
    expect(first.status).toBe(200);
    expect(first.body.result.isError).toBeUndefined();
    const stranger = await send(appsOnly);
    expectError(stranger, 409, 'conflict', 'Idempotency-Key');
    expect(stranger.text).not.toContain('"object":"list"');
    // Without the key, the same call is refused for its scope.
    const plain = await t.call({
      method: 'POST',
      url: '/api/v1/mcp',
      key: appsOnly,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body,
    });
    expect(JSON.parse(plain.body.result.content[0].text).error.code).toBe('insufficient_scope');
  });
});
