// The scope matrix (spec: Authentication rules 3–4): every operation of the registry
// refuses a key without its scope with 403 insufficient_scope, a read scope never allows a write,
// and the operation's own scope (or its resource's write scope) lets the request through. The
// registry is every /api/v1 operation of the OpenAPI document but the MCP endpoint; every /admin/v1
// operation opens to the operator token only; every MCP tool applies its operation's scope.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../src/domain/accounts/scopes.js';
import { OPERATIONS } from '../../src/operations/index.js';
import { toolName } from '../../src/operations/registry.js';
import { ADMIN_TOKEN, expectError, startTestApp, type TestApp } from '../helpers.js';
import { type DocumentOperation, documentOperations } from '../support/openapi-document.js';

let t: TestApp;
let tenantId: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ tenantId } = await t.tenant(['apps:read']));
});
afterAll(() => t.close());

const DUMMY_ID = '00000000-0000-7000-8000-000000000000';
const urlOf = (path: string) => path.replace(/:([A-Za-z_]+)/g, () => DUMMY_ID);

describe('scope matrix', () => {
  it('every operation refuses a key holding every scope but its resource’s', async () => {
    const keys = new Map<string, string>();
    for (const op of OPERATIONS) {
      const resource = op.scope.split(':')[0] as string;
      let k = keys.get(resource);
      if (!k) {
        k = await t.key(
          tenantId,
          ALL_SCOPES.filter((s) => !s.startsWith(`${resource}:`)),
        );
        keys.set(resource, k);
      }
      const r = await t.call({ method: op.method, url: urlOf(op.path), key: k, body: {} });
      expectError(r, 403, 'insufficient_scope');
      expect(r.body.error.message).toContain(op.scope);
    }
  });

  it('every write operation refuses a key with only the read scope of its resource', async () => {
    for (const op of OPERATIONS.filter((o) => o.scope.endsWith(':write'))) {
      const k = await t.key(tenantId, [op.scope.replace(':write', ':read')]);
      expectError(
        await t.call({ method: op.method, url: urlOf(op.path), key: k, body: {} }),
        403,
        'insufficient_scope',
      );
    }
  });

  it('the operation’s own scope gets past the scope check', async () => {
    for (const op of OPERATIONS) {
      const k = await t.key(tenantId, [op.scope]);
      const r = await t.call({ method: op.method, url: urlOf(op.path), key: k, body: {} });
      expect(r.status, `${op.id}: ${r.text.slice(0, 200)}`).not.toBe(403);
      expect(r.status, `${op.id}: ${r.text.slice(0, 200)}`).not.toBe(401);
    }
  });
});

/** The operations of the OpenAPI document the app serves. */
async function documentedOperations(): Promise<DocumentOperation[]> {
  const r = await t.call({ url: '/api/v1/openapi.json' });
  expect(r.status).toBe(200);
  return documentOperations(r.body);
}

const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');
/** The MCP endpoint: documented under /api/v1, served by src/mcp, not an operation of the registry. */
const MCP_ENDPOINT = ['GET /api/v1/mcp', 'POST /api/v1/mcp'];

describe('the OpenAPI document and the registry agree', () => {
  it('every /api/v1 operation of the document but the MCP endpoint is in the registry, so the matrix covers it', async () => {
    const documented = await documentedOperations();
    const api = documented.filter((op) => op.path.startsWith('/api/v1/')).map((op) => `${op.method} ${op.path}`);
    expect(api).toEqual(expect.arrayContaining(MCP_ENDPOINT));
    const registered = OPERATIONS.map((op) => `${op.method} ${openApiPath(op.path)}`);
    expect(api.filter((op) => !MCP_ENDPOINT.includes(op)).sort()).toEqual(registered.sort());
  });

  it('every operation of the document needs a key (/api/v1) or the operator token (/admin/v1); none is public', async () => {
    for (const { method, path, spec } of await documentedOperations()) {
      const scheme = path.startsWith('/admin/v1/') ? 'OperatorToken' : 'ScopedAPIKeyAuth';
      expect(path.startsWith('/api/v1/') || path.startsWith('/admin/v1/'), `${method} ${path}`).toBe(true);
      expect(spec.security, `${method} ${path}`).toHaveLength(1);
      expect(Object.keys(spec.security[0]), `${method} ${path}`).toEqual([scheme]);
    }
  });
});

/**
 * Every row of every table of the app's schema, `last_used_at` left out (written in batches
 * every ten seconds by the key lookups, src/http/auth.ts): what a refused request must not change.
 */
async function databaseState(): Promise<Record<string, string[]>> {
  const db = t.database.db;
  const { rows: tables } = await sql<{ name: string }>`
    select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE' order by 1`.execute(db);
  expect(tables.map((table) => table.name)).toEqual(expect.arrayContaining(['tenants', 'api_keys']));
  const state: Record<string, string[]> = {};
  for (const { name } of tables) {
    const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(name)}`.execute(db);
    state[name] = rows
      .map(({ last_used_at: _, ...row }) =>
        JSON.stringify(row, (_key, value) => (typeof value === 'bigint' ? String(value) : value)),
      )
      .sort();
  }
  return state;
}

// The control plane (DESIGN.md §2) takes the operator token as `Authorization: Bearer`, and nothing
// else: no header → 401 not_authenticated, a token that is not the operator's → 401 invalid_api_key
// (src/operations/control-plane/, behind `operatorCheck`). A tenant's key opens none of it, whatever its scopes.
describe('the control plane refuses anything but the operator token', () => {
  const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };
  /** A body that the operation takes, so that a request let through would do its work. */
  const BODIES: Record<string, () => unknown> = {
    adminCreateTenant: () => ({ tenant_id: `intruder-${randomBytes(4).toString('hex')}`, name: 'Intruder' }),
    adminCreateApiKey: () => ({ name: 'intruder', scopes: ALL_SCOPES }),
    adminCreateOwner: () => ({ email: 'intruder@example.com', password: 'correct horse battery staple' }),
  };

  let admin: DocumentOperation[];
  beforeAll(async () => {
    admin = (await documentedOperations()).filter((op) => op.path.startsWith('/admin/v1/'));
  });

  /** A tenant with an active key holding every scope, and a locked key (so that unlocking one does work). */
  async function victim() {
    const { tenantId: id, key } = await t.tenant(ALL_SCOPES);
    const locked = await t.call({
      method: 'POST',
      url: `/admin/v1/tenants/${id}/api-keys`,
      headers: operator,
      body: { name: 'locked', scopes: ['apps:read'] },
    });
    expect(locked.status).toBe(201);
    expect(
      (await t.call({ method: 'POST', url: `/admin/v1/api-keys/${locked.body.id}/lock`, headers: operator })).status,
    ).toBe(200);
    const keys = await t.call({ url: `/admin/v1/tenants/${id}/api-keys`, headers: operator });
    const active = keys.body.data.find((k: { status: string }) => k.status === 'active');
    return { tenantId: id, key, keyIds: [active.id as string, locked.body.id as string] };
  }

  /** The requests of an operation against a victim's records: one per key of it when the path names a key. */
  function requestsOf(op: DocumentOperation, target: Awaited<ReturnType<typeof victim>>) {
    const keyIds = op.path.includes('{key_id}') ? target.keyIds : [undefined];
    return keyIds.map((keyId) => {
      const url = op.path.replace(/\{([a-z_]+)\}/g, (_, name: string) => {
        if (name === 'tenant_id') return target.tenantId;
        if (name === 'key_id' && keyId) return keyId;
        throw new Error(`${op.spec.operationId}: no value for the path parameter ${name}; add one here`);
      });
      const body = BODIES[op.spec.operationId as string];
      if (op.spec.requestBody && !body) throw new Error(`${op.spec.operationId}: takes a body; add one to BODIES`);
      return { method: op.method as 'GET' | 'POST', url, ...(op.spec.requestBody ? { body: body?.() } : {}) };
    });
  }

  it('the document lists the control plane’s operations (DESIGN.md §2)', () => {
    expect(admin.map((op) => `${op.method} ${op.path}`)).toEqual(
      expect.arrayContaining([
        'POST /admin/v1/tenants',
        'POST /admin/v1/tenants/{tenant_id}/api-keys',
        'GET /admin/v1/tenants/{tenant_id}/api-keys',
        'POST /admin/v1/api-keys/{key_id}/revoke',
        'POST /admin/v1/api-keys/{key_id}/lock',
        'POST /admin/v1/api-keys/{key_id}/unlock',
      ]),
    );
  });

  it('every /admin/v1 operation refuses no credentials, a wrong token and a tenant key holding every scope, and does nothing', async () => {
    const target = await victim();
    const refusals: [string, Record<string, string>, string][] = [
      ['no credentials', {}, 'not_authenticated'],
      ['a wrong operator token', { authorization: 'Bearer not-the-operator-token' }, 'invalid_api_key'],
      ['a tenant key in X-API-Key', { 'x-api-key': target.key }, 'not_authenticated'],
      ['a tenant key as Authorization: Bearer', { authorization: `Bearer ${target.key}` }, 'invalid_api_key'],
      ['a tenant key both ways', { 'x-api-key': target.key, authorization: `Bearer ${target.key}` }, 'invalid_api_key'],
      ['the operator token in X-API-Key', { 'x-api-key': ADMIN_TOKEN }, 'not_authenticated'],
      ['the operator token without the Bearer scheme', { authorization: ADMIN_TOKEN }, 'not_authenticated'],
    ];
    const before = await databaseState();
    let sent = 0;
    for (const op of admin) {
      for (const request of requestsOf(op, target)) {
        for (const [name, headers, code] of refusals) {
          const r = await t.call({ ...request, headers });
          try {
            expectError(r, 401, code);
          } catch (error) {
            throw new Error(`${op.spec.operationId} ${request.method} ${request.url} with ${name}: ${error}`);
          }
          sent++;
        }
      }
    }
    expect(sent).toBeGreaterThanOrEqual(admin.length * refusals.length);
    expect(await databaseState()).toEqual(before);
    // The tenant's key still works: no refused revoke or lock reached it.
    expect((await t.call({ url: '/api/v1/apps', key: target.key })).status).toBe(200);
  });

  it('the operator token gets every /admin/v1 operation through, with these very requests', async () => {
    for (const op of admin) {
      // A victim of its own for each request: a revoke must not leave the next one a revoked key.
      for (const index of op.path.includes('{key_id}') ? [0, 1] : [0]) {
        const request = requestsOf(op, await victim())[index];
        if (!request) throw new Error(`${op.spec.operationId}: no request ${index}`);
        const r = await t.call({ ...request, headers: operator });
        expect(r.status, `${op.spec.operationId} ${request.url}: ${r.text.slice(0, 200)}`).toBeGreaterThanOrEqual(200);
        expect(r.status, `${op.spec.operationId} ${request.url}: ${r.text.slice(0, 200)}`).toBeLessThan(300);
      }
    }
  });
});

// MCP (docs/mcp.md, Tools: Scopes): `tools/list` shows only the tools the key's scopes allow, and
// calling another tool answers a tool error (`isError`) whose JSON text is the spec's error body with
// `insufficient_scope`, in the JSON-RPC result, never a JSON-RPC error.
describe('MCP scope matrix', () => {
  const ACCEPT = { accept: 'application/json, text/event-stream' };
  let nextId = 1;
  const rpc = (key: string, message: object | object[], headers: Record<string, string> = {}) =>
    t.call({ method: 'POST', url: '/api/v1/mcp', key, body: message, headers: { ...ACCEPT, ...headers } });
  const toolCall = (name: string) => ({
    jsonrpc: '2.0',
    id: nextId++,
    method: 'tools/call',
    params: { name, arguments: {} },
  });
  async function listTools(key: string): Promise<string[]> {
    const r = await rpc(key, { jsonrpc: '2.0', id: nextId++, method: 'tools/list' });
    expect(r.status, r.text.slice(0, 200)).toBe(200);
    expect(r.body.result.nextCursor).toBeUndefined();
    return r.body.result.tools.map((tool: { name: string }) => tool.name).sort();
  }

  /** Each tool's scope, from the registry the tools are built from (src/mcp/tools.ts). */
  const SCOPE_OF = new Map(OPERATIONS.map((op) => [toolName(op.id), op.scope]));
  /** Spec, Authentication rule 3: a scope allows itself, and a write scope its resource's read. */
  const grants = (granted: string, required: string) =>
    granted === required || (granted.endsWith(':write') && granted.replace(':write', ':read') === required);

  let tools: string[];
  beforeAll(async () => {
    tools = await listTools(await t.key(tenantId, ALL_SCOPES));
  });

  it('a key holding every scope sees every tool of the registry', () => {
    expect(tools.length).toBe(OPERATIONS.length);
    expect(tools).toEqual([...SCOPE_OF.keys()].sort());
  });

  it('tools/list shows a key holding one scope exactly the tools that scope allows', async () => {
    let shown = 0;
    for (const scope of ALL_SCOPES) {
      const expected = tools.filter((name) => grants(scope, SCOPE_OF.get(name) as string));
      expect(await listTools(await t.key(tenantId, [scope])), scope).toEqual(expected);
      shown += expected.length;
    }
    // Every tool is shown to its own scope, and every read tool once more to its write scope.
    expect(shown).toBeGreaterThan(tools.length);
  });

  it('every tool refuses a key holding every scope but its own (and its write scope) with insufficient_scope', async () => {
    const keys = new Map<string, string>();
    for (const name of tools) {
      const scope = SCOPE_OF.get(name) as string;
      const withheld = [scope, scope.replace(':read', ':write')];
      let key = keys.get(scope);
      if (!key) {
        key = await t.key(
          tenantId,
          ALL_SCOPES.filter((s) => !withheld.includes(s)),
        );
        keys.set(scope, key);
      }
      // Alone, a plain call is answered without an SDK server (src/mcp/exchange.ts); in a batch, by one.
      const call = toolCall(name);
      const alone = await rpc(key, call);
      expect(alone.status, `${name}: ${alone.text.slice(0, 200)}`).toBe(200);
      expect(alone.body, name).toMatchObject({ jsonrpc: '2.0', id: call.id, result: { isError: true } });
      expect(alone.body.result.structuredContent, name).toBeUndefined();
      const error = JSON.parse(alone.body.result.content[0].text).error;
      expect(error, name).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
      expect(error.message, name).toContain(scope);
      expect(error.doc_url, name).toMatch(/\/docs\/errors#insufficient_scope$/);
      const batched = await rpc(key, [call], { 'mcp-protocol-version': '2025-03-26' });
      expect(batched.body, name).toEqual([alone.body]);
    }
  });

  it('every tool lets its own scope past the scope check, and a read tool its write scope too', async () => {
    const keys = new Map<string, string>();
    const keyOf = async (scope: string) => {
      let key = keys.get(scope);
      if (!key) {
        key = await t.key(tenantId, [scope]);
        keys.set(scope, key);
      }
      return key;
    };
    for (const name of tools) {
      const scope = SCOPE_OF.get(name) as string;
      for (const granted of new Set([scope, scope.replace(':read', ':write')])) {
        const r = await rpc(await keyOf(granted), toolCall(name));
        const where = `${name} with ${granted}: ${r.text.slice(0, 200)}`;
        expect(r.status, where).toBe(200);
        expect(r.body.result, where).toBeDefined();
        if (r.body.result.isError) {
          expect(JSON.parse(r.body.result.content[0].text).error.code, where).not.toBe('insufficient_scope');
        }
      }
    }
  });
});
