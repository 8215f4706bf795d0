// Authentication, tenancy and scopes (spec: Authentication; DESIGN.md §3) and the control plane
// that manages tenants and keys (DESIGN.md §2).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { isOwnHost, tenantFromHost } from '../../src/http/auth.js';
import { ADMIN_TOKEN, expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

describe('API keys', () => {
  it('a missing or empty X-API-Key answers 401 not_authenticated', async () => {
    expectError(await t.call({ url: '/api/v1/apps' }), 401, 'not_authenticated');
    expectError(await t.call({ url: '/api/v1/apps', headers: { 'x-api-key': '' } }), 401, 'not_authenticated');
    const error = expectError(await t.call({ url: '/api/v1/apps' }), 401, 'not_authenticated');
    expect(error.type).toBe('authentication_error');
  });

  it('an unknown key answers 401 invalid_api_key', async () => {
    const error = expectError(await t.call({ url: '/api/v1/apps', key: 'wsk_not_a_key' }), 401, 'invalid_api_key');
    expect(error.type).toBe('authentication_error');
  });

  it('the secret is shown once and stored only as a SHA-256 hash', async () => {
    const { tenantId, key } = await t.tenant(['apps:read']);
    expect(key).toMatch(/^wsk_/);
    const rows = await t.database.db.selectFrom('api_keys').selectAll().where('tenant_id', '=', tenantId).execute();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(key);
    expect(rows[0]?.secret_hash).toMatch(/^[0-9a-f]{64}$/);
    const listed = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(listed.body.data[0]).toMatchObject({ prefix: key.slice(0, 12), status: 'active', scopes: ['apps:read'] });
    expect(listed.text).not.toContain(key);
  });

  it('revoked, locked and expired keys answer 401 invalid_api_key; unlocking restores a locked key', async () => {
    const { tenantId, key } = await t.tenant(['apps:read']);
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    const keyId = (await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin })).body.data[0].id;

    const locked = await t.call({ method: 'POST', url: `/admin/v1/api-keys/${keyId}/lock`, headers: admin });
    expect(locked.body).toMatchObject({ status: 'locked' });
    expectError(await t.call({ url: '/api/v1/apps', key }), 401, 'invalid_api_key');

    const unlocked = await t.call({ method: 'POST', url: `/admin/v1/api-keys/${keyId}/unlock`, headers: admin });
    expect(unlocked.body).toMatchObject({ status: 'active', locked_at: null });
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);

    const revoked = await t.call({ method: 'POST', url: `/admin/v1/api-keys/${keyId}/revoke`, headers: admin });
    expect(revoked.body).toMatchObject({ status: 'revoked' });
    expectError(await t.call({ url: '/api/v1/apps', key }), 401, 'invalid_api_key');
    expectError(
      await t.call({ method: 'POST', url: `/admin/v1/api-keys/${keyId}/unlock`, headers: admin }),
      409,
      'conflict',
    );

    const expiring = await t.call({
      method: 'POST',
      url: `/admin/v1/tenants/${tenantId}/api-keys`,
      headers: admin,
      body: { name: 'short', scopes: ['apps:read'], expires_at: new Date(Date.now() + 1500).toISOString() },
    });
    expect(expiring.status).toBe(201);
    expect((await t.call({ url: '/api/v1/apps', key: expiring.body.secret })).status).toBe(200);
    await sleep(1600);
    expectError(await t.call({ url: '/api/v1/apps', key: expiring.body.secret }), 401, 'invalid_api_key');
  });

  it('a key changed in the database by another instance is refused within one second', async () => {
    const { tenantId, key } = await t.tenant(['apps:read']);
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    // Another instance revokes it: straight in the database, bypassing this instance's cache reset.
    await t.database.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('tenant_id', '=', tenantId)
      .execute();
    await sleep(1000);
    expectError(await t.call({ url: '/api/v1/apps', key }), 401, 'invalid_api_key');
  });

  it('last use is recorded (in batches, off the request path)', async () => {
    const { tenantId, key } = await t.tenant(['apps:read']);
    await t.call({ url: '/api/v1/apps', key });
    await t.authenticator.close(); // flushes the batch
    const listed = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(listed.body.data[0].last_used_at).not.toBeNull();
  });
});

describe('tenancy', () => {
  it('reads the tenant from <tenant>.<BASE_DOMAIN>; bare hosts name none', () => {
    expect(tenantFromHost('acme.localhost:8080', 'localhost')).toBe('acme');
    expect(tenantFromHost('acme.api.example.com', 'api.example.com')).toBe('acme');
    expect(tenantFromHost('api.example.com', 'api.example.com')).toBeUndefined();
    expect(tenantFromHost('127.0.0.1:8080', 'example.com')).toBeUndefined();
    expect(tenantFromHost('[::1]:8080', 'example.com')).toBeUndefined();
    expect(tenantFromHost('localhost', 'example.com')).toBeUndefined();
    // A fully qualified name's trailing dot names the same host.
    expect(tenantFromHost('acme.localhost.', 'localhost')).toBe('acme');
    expect(tenantFromHost('acme.api.example.com.:443', 'api.example.com')).toBe('acme');
    expect(tenantFromHost('api.example.com.', 'api.example.com')).toBeUndefined();
    // An empty port (RFC 9110 allows it) names the same host too.
    expect(tenantFromHost('acme.localhost:', 'localhost')).toBe('acme');
    expect(tenantFromHost('acme.localhost.:', 'localhost')).toBe('acme');
    expect(tenantFromHost('[::1]:', 'localhost')).toBeUndefined();
  });

  it('a Host that is not a host name names no tenant, so that no key matches it (null)', () => {
    for (const host of [
      'acme.localhost..',
      '.acme.localhost',
      'acme..localhost',
      'acme.localhost:x',
      'acme.localhost:80:80',
      'acme.localhost :80',
      'acme.localhost/',
      '::1',
      '[::1',
      '[not-an-ip]:80',
    ]) {
      expect(tenantFromHost(host, 'localhost'), host).toBeNull();
      expect(isOwnHost(host, 'localhost', undefined), host).toBe(false);
    }
  });

  it("knows its own hosts (for the MCP endpoint's Origin check): BASE_DOMAIN and below, loopback, IPs, PUBLIC_URL", () => {
    for (const host of ['api.example.com', 'acme.api.example.com:443', 'localhost:8080', '10.0.0.5', '[::1]:8080']) {
      expect(isOwnHost(host, 'api.example.com', undefined), host).toBe(true);
    }
    expect(isOwnHost('evil.example', 'api.example.com', undefined)).toBe(false);
    expect(isOwnHost('notapi.example.com', 'api.example.com', undefined)).toBe(false);
    expect(isOwnHost('support.shop.example', 'api.example.com', 'https://support.shop.example')).toBe(true);
    expect(isOwnHost('support.shop.example.:443', 'api.example.com', 'https://support.shop.example')).toBe(true);
  });

  it("a key sent to another tenant's host answers 401 invalid_api_key; its own host and bare hosts work", async () => {
    const a = await t.tenant(['apps:read']);
    const b = await t.tenant(['apps:read']);
    expect(
      (await t.call({ url: '/api/v1/apps', key: a.key, headers: { host: `${a.tenantId}.localhost` } })).status,
    ).toBe(200);
    expect((await t.call({ url: '/api/v1/apps', key: a.key, headers: { host: '127.0.0.1:8080' } })).status).toBe(200);
    for (const host of [
      `${b.tenantId}.localhost`,
      `${b.tenantId}.localhost.`,
      `${b.tenantId}.localhost.:8080`,
      // An empty port is the same host; anything malformed is no host of the key's.
      `${b.tenantId}.localhost:`,
      `${b.tenantId}.localhost.:`,
      `${b.tenantId}.localhost..`,
      `${b.tenantId}.localhost:x`,
      `${a.tenantId}.localhost..`,
    ]) {
      expectError(await t.call({ url: '/api/v1/apps', key: a.key, headers: { host } }), 401, 'invalid_api_key');
    }
    expect(
      (await t.call({ url: '/api/v1/apps', key: a.key, headers: { host: `${a.tenantId}.localhost:` } })).status,
    ).toBe(200);
  });

  it('BASE_DOMAIN with a trailing dot is the same domain: host binding still holds; an empty label stops the start', async () => {
    expect(loadConfig({ BASE_DOMAIN: 'Example.TEST.' }).baseDomain).toBe('example.test');
    for (const bad of ['example.test..', '.example.test', 'example..test', '.', 'exa mple.test']) {
      expect(() => loadConfig({ BASE_DOMAIN: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ BASE_DOMAIN: bad }), bad).toThrow(/^BASE_DOMAIN must be a host name/);
    }
    const dotted = await startTestApp({ BASE_DOMAIN: 'example.test.' });
    try {
      const a = await dotted.tenant(['apps:read']);
      const b = await dotted.tenant(['apps:read']);
      const own = await dotted.call({
        url: '/api/v1/apps',
        key: a.key,
        headers: { host: `${a.tenantId}.example.test` },
      });
      expect(own.status).toBe(200);
      for (const host of [`${b.tenantId}.example.test`, `${b.tenantId}.example.test.`]) {
        expectError(await dotted.call({ url: '/api/v1/apps', key: a.key, headers: { host } }), 401, 'invalid_api_key');
      }
    } finally {
      await dotted.close();
    }
  });

  it("another tenant's records are invisible: 404 on every id-bearing route, absent from lists", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    await t.call({ method: 'POST', url: '/api/v1/apps', key: a.key, body: { name: 'secret-app' } });
    await t.call({
      method: 'POST',
      url: '/api/v1/apps/secret-app/commits',
      key: a.key,
      body: { message: 'm', files: [{ path: 'f', content: 'x' }] },
    });
    const workflow = await t.call({ method: 'POST', url: '/api/v1/workflows', key: a.key, body: { name: 'refund' } });
    const wf = workflow.body.id as string;

    const idRoutes: [string, string, unknown?][] = [
      ['GET', '/api/v1/apps/secret-app'],
      ['DELETE', '/api/v1/apps/secret-app'],
      ['GET', '/api/v1/apps/secret-app/commits'],
      ['GET', '/api/v1/apps/secret-app/files'],
      ['POST', '/api/v1/apps/secret-app/commits', { message: 'm', files: [{ path: 'g', content: 'y' }] }],
      ['GET', `/api/v1/workflows/${wf}`],
      ['PUT', `/api/v1/workflows/${wf}/enabled`, { enabled: true }],
      ['DELETE', `/api/v1/workflows/${wf}`],
    ];
    for (const [method, url, body] of idRoutes) {
      expectError(
        await t.call({ method: method as 'GET', url, key: b.key, ...(body ? { body } : {}) }),
        404,
        'not_found',
      );
    }
    expect((await t.call({ url: '/api/v1/apps', key: b.key })).body.data).toEqual([]);
    expect((await t.call({ url: '/api/v1/workflows', key: b.key })).body.data).toEqual([]);
    // And nothing changed for tenant A.
    expect((await t.call({ url: `/api/v1/workflows/${wf}`, key: a.key })).body.enabled).toBe(false);
    expect((await t.call({ url: '/api/v1/apps/secret-app', key: a.key })).body.file_count).toBe(1);
  });
});

describe('scopes', () => {
  it('a key without the scope answers 403 insufficient_scope', async () => {
    const { key } = await t.tenant(['workflows:read']);
    const error = expectError(await t.call({ url: '/api/v1/apps', key }), 403, 'insufficient_scope');
    expect(error.type).toBe('permission_error');
    expect(error.message).toContain('apps:read');
  });

  it('a read scope does not allow writes', async () => {
    const { key } = await t.tenant(['apps:read']);
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'x' } }),
      403,
      'insufficient_scope',
    );
  });

  it('a write scope includes read access for the same resource', async () => {
    const { key } = await t.tenant(['apps:write']);
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    expect((await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'w' } })).status).toBe(201);
  });

  it('scope is checked before the body is validated', async () => {
    const { key } = await t.tenant(['apps:read']);
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { bogus: 1 } }),
      403,
      'insufficient_scope',
    );
  });
});

describe('control plane', () => {
  it('an ADMIN_TOKEN with whitespace inside stops the start, unrepeated: no Bearer header could carry it', () => {
    for (const token of ['operator token with spaces', 'operator-token\twith-tab', 'operator-token\u00a0nbsp-x']) {
      expect(() => loadConfig({ ADMIN_TOKEN: token }), JSON.stringify(token)).toThrow(ConfigError);
      try {
        loadConfig({ ADMIN_TOKEN: token });
      } catch (error) {
        expect((error as Error).message).toBe('ADMIN_TOKEN must not contain spaces or other whitespace');
      }
    }
    // Around it, whitespace is trimmed as for every setting.
    expect(loadConfig({ ADMIN_TOKEN: `  ${ADMIN_TOKEN}\n` }).adminToken).toBe(ADMIN_TOKEN);
  });

  it('needs the operator token: missing → not_authenticated, wrong → invalid_api_key', async () => {
    expectError(await t.call({ url: '/admin/v1/tenants' }), 401, 'not_authenticated');
    expectError(
      await t.call({ url: '/admin/v1/tenants', headers: { authorization: 'Bearer nope' } }),
      401,
      'invalid_api_key',
    );
  });

  it('creates tenants (201) and refuses a duplicate id (409) or a malformed one (422)', async () => {
    const created = await t.call({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: admin,
      body: { tenant_id: 'acme', name: 'Acme' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'acme', object: 'tenant', name: 'Acme' });
    expectError(
      await t.call({
        method: 'POST',
        url: '/admin/v1/tenants',
        headers: admin,
        body: { tenant_id: 'acme', name: 'A' },
      }),
      409,
      'conflict',
      'tenant_id',
    );
    expectError(
      await t.call({
        method: 'POST',
        url: '/admin/v1/tenants',
        headers: admin,
        body: { tenant_id: 'Bad_Id', name: 'A' },
      }),
      422,
      'validation_error',
      'tenant_id',
    );
    // A tenant's id is its host name: the admin console's and the service's own names are taken.
    for (const tenant_id of ['admin', 'www', 'api']) {
      expectError(
        await t.call({ method: 'POST', url: '/admin/v1/tenants', headers: admin, body: { tenant_id, name: 'A' } }),
        422,
        'validation_error',
        'tenant_id',
      );
    }
  });

  it('lists tenants newest first, page by page, and refuses a cursor it did not issue', async () => {
    // Created in this order, named against it, so neither alphabetical order passes for newest first.
    const ids = ['aa-list-1', 'mm-list-2', 'zz-list-3'];
    for (const id of ids) {
      await t.call({ method: 'POST', url: '/admin/v1/tenants', headers: admin, body: { tenant_id: id, name: id } });
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { id: string }[]; next_cursor: string | null } } = await t.call({
        url: `/admin/v1/tenants?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
        headers: admin,
      });
      seen.push(...page.body.data.map((tenant) => tenant.id));
      cursor = page.body.next_cursor;
    } while (cursor !== null);
    expect(seen.slice(0, 3)).toEqual([...ids].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    expectError(
      await t.call({ url: `/admin/v1/tenants?cursor=${Buffer.from('x y').toString('base64url')}`, headers: admin }),
      422,
      'validation_error',
      'cursor',
    );
  });

  it('refuses a scope outside the catalogue (422 naming it) and an expiry in the past', async () => {
    expectError(
      await t.call({
        method: 'POST',
        url: '/admin/v1/tenants/acme/api-keys',
        headers: admin,
        body: { name: 'k', scopes: ['apps:read', 'root:write'] },
      }),
      422,
      'validation_error',
      'scopes[1]',
    );
    // The settings page's rules too: a key with no scope, or a name of spaces, is refused.
    for (const [body, param] of [
      [{ name: 'k', scopes: [] }, 'scopes'],
      [{ name: '   ', scopes: ['apps:read'] }, 'name'],
    ] as const) {
      expectError(
        await t.call({ method: 'POST', url: '/admin/v1/tenants/acme/api-keys', headers: admin, body }),
        422,
        'validation_error',
        param,
      );
    }
    // In the past; on a leap second, which passes the date-time format but no clock here holds.
    for (const expires_at of ['2000-01-01T00:00:00.000Z', '2030-06-30T23:59:60Z']) {
      expectError(
        await t.call({
          method: 'POST',
          url: '/admin/v1/tenants/acme/api-keys',
          headers: admin,
          body: { name: 'k', scopes: ['apps:read'], expires_at },
        }),
        422,
        'validation_error',
        'expires_at',
      );
    }
  });

  it('creates a key with its fields and the secret once; unknown tenant or key → 404', async () => {
    const created = await t.call({
      method: 'POST',
      url: '/admin/v1/tenants/acme/api-keys',
      headers: admin,
      body: { name: 'ci', scopes: ['apps:write'] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ object: 'api_key', name: 'ci', scopes: ['apps:write'], expires_at: null });
    expect(created.body.secret).toMatch(/^wsk_/);
    const fetched = await t.call({ url: `/admin/v1/api-keys/${created.body.id}`, headers: admin });
    expect(fetched.body.secret).toBeUndefined();
    expectError(
      await t.call({
        method: 'POST',
        url: '/admin/v1/tenants/nobody/api-keys',
        headers: admin,
        body: { name: 'k', scopes: [] },
      }),
      404,
      'not_found',
    );
    expectError(
      await t.call({
        method: 'POST',
        url: '/admin/v1/api-keys/00000000-0000-7000-8000-000000000000/revoke',
        headers: admin,
      }),
      404,
      'not_found',
    );
  });

  it('revoke, lock and unlock take no body: one sent is refused and the key is left as it was', async () => {
    const { tenantId } = await t.tenant();
    const created = await t.call({
      method: 'POST',
      url: `/admin/v1/tenants/${tenantId}/api-keys`,
      headers: admin,
      body: { name: 'kept', scopes: ['apps:read'] },
    });
    for (const action of ['revoke', 'lock', 'unlock']) {
      const url = `/admin/v1/api-keys/${created.body.id}/${action}`;
      expectError(await t.call({ method: 'POST', url, headers: admin, body: [] }), 400, 'bad_request');
      expectError(
        await t.call({ method: 'POST', url, headers: admin, body: { reason: 'leaked' } }),
        422,
        'validation_error',
        'reason',
      );
    }
    expect((await t.call({ url: '/api/v1/apps', key: created.body.secret })).status).toBe(200);
    // `{}`, which some clients send with every POST, is no body.
    const revoked = await t.call({
      method: 'POST',
      url: `/admin/v1/api-keys/${created.body.id}/revoke`,
      headers: admin,
      body: {},
    });
    expect(revoked.body).toMatchObject({ status: 'revoked' });
  });
});
