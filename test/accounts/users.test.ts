// Users and permissions (DESIGN.md §7, users; spec: "Other operations named in product updates",
// Authentication 7): upsert by e-mail, permissions added and removed, notifications listed, the
// accounts scopes, tenant isolation, and Admin out of reach by any combination of fields.
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PERMISSIONS, ROLES } from '../../src/domain/accounts/users.js';
import { DomainError } from '../../src/domain/errors.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const upsert = (key: string, body: unknown) => t.call({ method: 'POST', url: '/api/v1/users', key, body });
const addPermissions = (key: string, userId: string, body: unknown) =>
  t.call({ method: 'POST', url: `/api/v1/users/${userId}/permissions`, key, body });
const removePermission = (key: string, userId: string, permission: string) =>
  t.call({ method: 'DELETE', url: `/api/v1/users/${userId}/permissions/${permission}`, key });
const names = (user: { permissions: { name: string }[] }) => user.permissions.map((p) => p.name);

// biome-ignore lint/suspicious/noExplicitAny: tests read JSON answers loosely, as helpers.ts does.
type Json = any;

/** Calls an MCP tool (the tools are built from the same operations) with plain JSON-RPC. */
async function mcpTool(key: string, name: string, args: Record<string, unknown>) {
  const r = await t.call({
    method: 'POST',
    url: '/api/v1/mcp',
    key,
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
  });
  if (r.status !== 200 || !r.body?.result) throw new Error(`mcp ${name}: ${r.status} ${r.text}`);
  const result = r.body.result;
  // A tool error is its JSON text (no structuredContent); a record, the structured content.
  if (result.isError) expect(result.structuredContent).toBeUndefined();
  return {
    isError: result.isError as boolean | undefined,
    answer: (result.isError ? JSON.parse(result.content[0].text) : result.structuredContent) as Record<string, Json>,
  };
}

/** One outcome shape for REST and MCP: the error (code, param, message) or the record. */
interface Outcome {
  status: number | undefined;
  error: { code: string; param?: string; message: string } | undefined;
  record: Json;
}
const fromRest = (r: { status: number; body: Json }): Outcome => ({
  status: r.status,
  error: r.status >= 400 ? r.body.error : undefined,
  record: r.status < 400 ? r.body : undefined,
});
const fromMcp = (r: { isError?: boolean | undefined; answer: Record<string, Json> }): Outcome => ({
  status: undefined,
  error: r.isError ? r.answer.error : undefined,
  record: r.isError ? undefined : r.answer,
});

describe('POST /users (create or update by e-mail)', () => {
  it('creates a user (201) with the default role, a name from the e-mail and no permissions', async () => {
    const { key } = await t.tenant();
    const created = await upsert(key, { email: 'ana.silva@example.com' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'user',
      email: 'ana.silva@example.com',
      name: 'ana.silva',
      role: 'agent',
      permissions: [],
    });
    const read = await t.call({ url: `/api/v1/users/${created.body.id}`, key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
  });

  it('matches the e-mail case-insensitively and updates the user (200): fields sent change, others stay', async () => {
    const { key } = await t.tenant();
    const created = await upsert(key, {
      email: 'Bo@Example.com',
      name: 'Bo',
      role: 'supervisor',
      permissions: ['tasks.view'],
    });
    expect(created.status).toBe(201);
    const updated = await upsert(key, { email: 'bo@EXAMPLE.COM', name: 'Bo Li' });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      id: created.body.id,
      email: 'bo@EXAMPLE.COM',
      name: 'Bo Li',
      role: 'supervisor',
    });
    expect(names(updated.body)).toEqual(['tasks.view']);
    const list = await t.call({ url: '/api/v1/users', key });
    expect(list.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(list.body.data).toHaveLength(1);
  });

  it('sets the whole permission set when `permissions` is sent, ignoring case, spaces and repeats', async () => {
    const { key } = await t.tenant();
    await upsert(key, { email: 'cy@example.com', permissions: ['tasks.view', 'analytics.view'] });
    const updated = await upsert(key, {
      email: 'cy@example.com',
      role: ' Viewer ',
      permissions: ['Knowledge.View', ' knowledge.view', 'tasks.view'],
    });
    expect(updated.status).toBe(200);
    expect(updated.body.role).toBe('viewer');
    expect(names(updated.body)).toEqual(['knowledge.view', 'tasks.view']);
    const cleared = await upsert(key, { email: 'cy@example.com', permissions: [] });
    expect(cleared.body.permissions).toEqual([]);
  });

  it('refuses a role or a permission outside the catalogue with 422 validation_error naming the field', async () => {
    const { key } = await t.tenant();
    expectError(await upsert(key, { email: 'dee@example.com', role: 'owner' }), 422, 'validation_error', 'role');
    expectError(
      await upsert(key, { email: 'dee@example.com', permissions: ['tasks.view', 'tasks.delete'] }),
      422,
      'validation_error',
      'permissions[1]',
    );
    expect((await t.call({ url: '/api/v1/users', key })).body.data).toEqual([]);
  });

  it('validates the body: e-mail required and well-formed, no unknown fields', async () => {
    const { key } = await t.tenant();
    expectError(await upsert(key, { name: 'x' }), 422, 'missing_required_parameter', 'email');
    expectError(await upsert(key, { email: 'not-an-email' }), 422, 'validation_error', 'email');
    expectError(await upsert(key, { email: 'e@example.com', admin: true }), 422, 'validation_error', 'admin');
    expectError(await upsert(key, { email: 'e@example.com', name: '  ' }), 422, 'validation_error', 'name');
  });

  it('makes one user when the same e-mail is upserted concurrently (one 201, the rest 200)', async () => {
    const { key } = await t.tenant();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => upsert(key, { email: i % 2 ? 'race@example.com' : 'RACE@example.com' })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
  });
});

describe('permissions', () => {
  it('POST /users/{id}/permissions adds on top of the existing ones', async () => {
    const { key } = await t.tenant();
    const user = (await upsert(key, { email: 'f@example.com', permissions: ['tasks.view'] })).body;
    const added = await addPermissions(key, user.id, { permissions: ['knowledge.edit', 'analytics.view'] });
    expect(added.status).toBe(200);
    expect(names(added.body)).toEqual(['analytics.view', 'knowledge.edit', 'tasks.view']);
    const read = await t.call({ url: `/api/v1/users/${user.id}`, key });
    expect(read.body.permissions).toEqual(added.body.permissions);
  });

  it('adding a permission already held changes nothing (same ids, same updated_at)', async () => {
    const { key } = await t.tenant();
    const user = (await upsert(key, { email: 'g@example.com', permissions: ['tasks.view', 'tasks.manage'] })).body;
    const again = await addPermissions(key, user.id, { permissions: ['TASKS.VIEW', 'tasks.manage'] });
    expect(again.status).toBe(200);
    expect(again.body.permissions).toEqual(user.permissions);
    expect(again.body.updated_at).toBe(user.updated_at);
  });

  it('validates the list: not empty, catalogue names only (param permissions[i])', async () => {
    const { key } = await t.tenant();
    const user = (await upsert(key, { email: 'h@example.com' })).body;
    // As every other list of 1 to 100 items: empty_items and too_many_items.
    expectError(await addPermissions(key, user.id, { permissions: [] }), 422, 'empty_items', 'permissions');
    const many = Array.from({ length: 101 }, () => 'manage_tasks');
    expectError(await addPermissions(key, user.id, { permissions: many }), 422, 'too_many_items', 'permissions');
    expectError(await addPermissions(key, user.id, {}), 422, 'missing_required_parameter', 'permissions');
    expectError(
      await addPermissions(key, user.id, { permissions: ['tasks.view', 'nope'] }),
      422,
      'validation_error',
      'permissions[1]',
    );
    expect((await t.call({ url: `/api/v1/users/${user.id}`, key })).body.permissions).toEqual([]);
  });

  it('DELETE /users/{id}/permissions/{permission_id} removes one, by id or by name; a second time is 404', async () => {
    const { key } = await t.tenant();
    const user = (
      await upsert(key, { email: 'i@example.com', permissions: ['tasks.view', 'tasks.manage', 'analytics.view'] })
    ).body;
    const target = user.permissions.find((p: { name: string }) => p.name === 'tasks.manage');
    const removed = await removePermission(key, user.id, target.id);
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ id: target.id, object: 'deleted', deleted: true });
    expect(names((await t.call({ url: `/api/v1/users/${user.id}`, key })).body)).toEqual([
      'analytics.view',
      'tasks.view',
    ]);
    expectError(await removePermission(key, user.id, target.id), 404, 'not_found');

    // A name ignores case and surrounding spaces, as when permissions are added.
    expect((await removePermission(key, user.id, '%20Analytics.View%20')).status).toBe(200);
    expect(names((await t.call({ url: `/api/v1/users/${user.id}`, key })).body)).toEqual(['tasks.view']);
    expectError(await removePermission(key, user.id, 'knowledge.edit'), 404, 'not_found');
    // A name with a NUL or another control character names nothing (never a database refusal).
    for (const name of ['tasks%00view', 'tasks%01view']) {
      expectError(await removePermission(key, user.id, name), 404, 'not_found');
    }
  });

  it('answers 404 for a user that does not exist or a path id that is not a UUID', async () => {
    const { key } = await t.tenant();
    const missing = '0190a0e0-0000-7000-8000-000000000000';
    expectError(await t.call({ url: `/api/v1/users/${missing}`, key }), 404, 'not_found');
    expectError(await t.call({ url: '/api/v1/users/nope', key }), 404, 'not_found');
    expectError(await addPermissions(key, missing, { permissions: ['tasks.view'] }), 404, 'not_found');
    expectError(await removePermission(key, missing, 'tasks.view'), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/users/${missing}/notifications`, key }), 404, 'not_found');
  });
});

describe('scopes and tenants', () => {
  it('the three writes need accounts:write: an accounts:read key reads but gets 403 insufficient_scope', async () => {
    const { tenantId, key } = await t.tenant();
    const user = (await upsert(key, { email: 'j@example.com', permissions: ['tasks.view'] })).body;
    const reader = await t.key(tenantId, ['accounts:read']);
    expect((await t.call({ url: `/api/v1/users/${user.id}`, key: reader })).status).toBe(200);
    expect((await t.call({ url: '/api/v1/users', key: reader })).status).toBe(200);
    expect((await t.call({ url: `/api/v1/users/${user.id}/notifications`, key: reader })).status).toBe(200);
    expectError(await upsert(reader, { email: 'k@example.com' }), 403, 'insufficient_scope');
    expectError(await addPermissions(reader, user.id, { permissions: ['analytics.view'] }), 403, 'insufficient_scope');
    expectError(await removePermission(reader, user.id, 'tasks.view'), 403, 'insufficient_scope');
    const other = await t.key(tenantId, ['tasks:write']);
    expectError(await t.call({ url: '/api/v1/users', key: other }), 403, 'insufficient_scope');
    expect(names((await t.call({ url: `/api/v1/users/${user.id}`, key })).body)).toEqual(['tasks.view']);
  });

  it("another tenant's key finds none of a tenant's users (404), and the same e-mail there is another user", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const user = (await upsert(a.key, { email: 'shared@example.com', permissions: ['tasks.view'] })).body;
    expectError(await t.call({ url: `/api/v1/users/${user.id}`, key: b.key }), 404, 'not_found');
    expectError(await addPermissions(b.key, user.id, { permissions: ['analytics.view'] }), 404, 'not_found');
    expectError(await removePermission(b.key, user.id, user.permissions[0].id), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/users/${user.id}/notifications`, key: b.key }), 404, 'not_found');
    expect((await t.call({ url: '/api/v1/users', key: b.key })).body.data).toEqual([]);
    const theirs = await upsert(b.key, { email: 'SHARED@example.com' });
    expect(theirs.status).toBe(201);
    expect(theirs.body.id).not.toBe(user.id);
    expect(names((await t.call({ url: `/api/v1/users/${user.id}`, key: a.key })).body)).toEqual(['tasks.view']);
  });

  it('lists users newest first, a page at a time', async () => {
    const { key } = await t.tenant();
    for (const email of ['p1@example.com', 'p2@example.com', 'p3@example.com']) await upsert(key, { email });
    const first = await t.call({ url: '/api/v1/users?limit=2', key });
    expect(first.body.data.map((u: { email: string }) => u.email)).toEqual(['p3@example.com', 'p2@example.com']);
    expect(first.body.has_more).toBe(true);
    const second = await t.call({ url: `/api/v1/users?limit=2&cursor=${first.body.next_cursor}`, key });
    expect(second.body.data.map((u: { email: string }) => u.email)).toEqual(['p1@example.com']);
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });
  });
});

describe('Admin can never be granted (spec: Authentication 7)', () => {
  const variants = [
    'admin',
    'Admin',
    ' ADMIN ',
    'aDmIn\t',
    'administrator',
    'workspace.admin',
    'ＡＤＭＩＮ',
    'ad\u200bmin',
  ];

  it('refuses `admin` as a role in any spelling, on create and on update (422 validation_error, param role)', async () => {
    const { key } = await t.tenant();
    for (const role of variants) {
      const error = expectError(await upsert(key, { email: 'new@example.com', role }), 422, 'validation_error', 'role');
      expect(error.message).toMatch(/never grant Admin/);
    }
    expect((await t.call({ url: '/api/v1/users', key })).body.data).toEqual([]);
    const user = (await upsert(key, { email: 'old@example.com', role: 'viewer' })).body;
    for (const role of variants) {
      expectError(await upsert(key, { email: 'OLD@example.com', role }), 422, 'validation_error', 'role');
    }
    expect((await t.call({ url: `/api/v1/users/${user.id}`, key })).body).toEqual(user);
  });

  it('refuses `admin` as a permission on upsert and on add, naming the item (permissions[i])', async () => {
    const { key } = await t.tenant();
    const user = (await upsert(key, { email: 'm@example.com', permissions: ['tasks.view'] })).body;
    for (const permission of variants) {
      expectError(
        await upsert(key, { email: 'm@example.com', permissions: ['analytics.view', permission] }),
        422,
        'validation_error',
        'permissions[1]',
      );
      expectError(
        await addPermissions(key, user.id, { permissions: ['tasks.view', 'analytics.view', permission] }),
        422,
        'validation_error',
        'permissions[2]',
      );
    }
    expect((await t.call({ url: `/api/v1/users/${user.id}`, key })).body).toEqual(user);
  });

  it('holds in the domain itself, so MCP tools built from these operations inherit it', async () => {
    const { tenantId } = await t.tenant();
    const refused = (promise: Promise<unknown>, param: string) =>
      expect(promise).rejects.toSatisfy(
        (e: unknown) => e instanceof DomainError && e.code === 'validation_error' && e.param === param,
      );
    await refused(t.services.users.upsertUser(tenantId, { email: 'n@example.com', role: ' admin' }), 'role');
    await refused(
      t.services.users.upsertUser(tenantId, { email: 'n@example.com', permissions: ['Admin'] }),
      'permissions[0]',
    );
    const { user } = await t.services.users.upsertUser(tenantId, { email: 'n@example.com' });
    await refused(t.services.users.addPermissions(tenantId, user.id, ['ADMIN']), 'permissions[0]');
    expect((await t.services.users.getUser(tenantId, user.id)).permissions).toEqual([]);
  });

  it('holds over MCP: upsert_user and add_user_permissions refuse admin, and need accounts:write', async () => {
    const { tenantId, key } = await t.tenant(['accounts:write']);
    const refused = await mcpTool(key, 'upsert_user', { email: 'o@example.com', role: 'ADMIN' });
    expect(refused.isError).toBe(true);
    expect(refused.answer.error).toMatchObject({ code: 'validation_error', param: 'role' });
    const user = await mcpTool(key, 'upsert_user', { email: 'o@example.com', permissions: ['tasks.view'] });
    expect(user.answer).toMatchObject({ object: 'user', email: 'o@example.com' });
    const userId = user.answer.id;
    const add = await mcpTool(key, 'add_user_permissions', { user_id: userId, permissions: [' Admin'] });
    expect(add.answer.error).toMatchObject({ code: 'validation_error', param: 'permissions[0]' });
    const removed = await mcpTool(key, 'remove_user_permission', { user_id: userId, permission_id: 'tasks.view' });
    expect(removed.answer).toMatchObject({ object: 'deleted', deleted: true });
    const reader = await t.key(tenantId, ['accounts:read']);
    const denied = await mcpTool(reader, 'upsert_user', { email: 'p@example.com' });
    expect(denied.answer.error).toMatchObject({ code: 'insufficient_scope' });
    expect((await t.call({ url: `/api/v1/users/${userId}`, key })).body).toMatchObject({
      role: 'agent',
      permissions: [],
    });
    expect((await t.call({ url: '/api/v1/users', key })).body.data).toHaveLength(1);
  });

  it('is repeated by the database: a row saying admin cannot be written even around the API', async () => {
    const { tenantId } = await t.tenant();
    const db = t.database.db;
    await expect(
      sql`insert into users (id, tenant_id, email, name, role)
          values ('0190a0e0-0000-7000-8000-00000000a001', ${tenantId}, 'x@example.com', 'x', 'admin')`.execute(db),
    ).rejects.toMatchObject({ code: '23514' });
    const { user } = await t.services.users.upsertUser(tenantId, { email: 'y@example.com' });
    await expect(
      sql`insert into user_permissions (id, tenant_id, user_id, name)
          values ('0190a0e0-0000-7000-8000-00000000a002', ${tenantId}, ${user.id}, 'admin.all')`.execute(db),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('no sequence of creates, updates and additions, over REST or MCP, ever leaves a user admin (property-based)', async () => {
    const roleNames = Object.keys(ROLES);
    const permissionNames = Object.keys(PERMISSIONS);
    const recase = (word: string) =>
      fc
        .array(fc.boolean(), { minLength: word.length, maxLength: word.length })
        .map((upper) => [...word].map((c, i) => (upper[i] ? c.toUpperCase() : c.toLowerCase())).join(''));
    const padded = (word: fc.Arbitrary<string>) =>
      fc
        .tuple(fc.constantFrom('', ' ', '\t', '  '), word, fc.constantFrom('', ' ', '\n'))
        .map(([a, w, b]) => a + w + b);
    const adminSpelling = padded(
      fc
        .constantFrom(
          'admin',
          'administrator',
          'super_admin',
          'workspace.admin',
          'admin.all',
          'ad min',
          'a-d-m-i-n',
          'ＡＤＭＩＮ',
          'ad\u200bmin',
        )
        .chain(recase),
    );
    const value = (catalogue: string[]) =>
      fc.oneof(
        { arbitrary: padded(fc.constantFrom(...catalogue).chain(recase)), weight: 12 },
        { arbitrary: adminSpelling, weight: 2 },
        { arbitrary: fc.string({ minLength: 1, maxLength: 30 }), weight: 1 },
      );
    const email = fc.constantFrom('ana@example.com', 'bo@example.com', 'cy@example.com').chain(recase);
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('upsert' as const),
        via: fc.constantFrom('rest' as const, 'mcp' as const),
        email,
        role: fc.option(value(roleNames), { nil: undefined }),
        permissions: fc.option(fc.array(value(permissionNames), { maxLength: 5 }), { nil: undefined }),
      }),
      fc.record({
        kind: fc.constant('add' as const),
        via: fc.constantFrom('rest' as const, 'mcp' as const),
        email,
        permissions: fc.array(value(permissionNames), { minLength: 1, maxLength: 5 }),
      }),
    );

    // The model: what each user should hold after every accepted call.
    const normal = (v: string) => v.trim().toLowerCase();
    const firstInvalid = (values: string[], catalogue: string[]) =>
      values.findIndex((v) => !catalogue.includes(normal(v)));

    // What the runs went through, so the property is known to have met both outcomes.
    const seen = { accepted: 0, refusedAdmin: 0, mcp: 0 };
    const check = (outcome: Outcome, refusedAt: string | undefined, acceptedStatus: number) => {
      if (refusedAt !== undefined) {
        expect(outcome.error).toMatchObject({ code: 'validation_error', param: refusedAt });
        if (/never grant Admin/.test(outcome.error?.message ?? '')) seen.refusedAdmin++;
      } else {
        expect(outcome.error).toBeUndefined();
        if (outcome.status !== undefined) expect(outcome.status).toBe(acceptedStatus);
        seen.accepted++;
      }
    };
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 8 }), async (steps) => {
        const { key, tenantId } = await t.tenant(['accounts:write']);
        const model = new Map<string, { id: string; role: string; permissions: Set<string> }>();
        for (const s of steps) {
          const known = model.get(s.email.toLowerCase());
          if (s.via === 'mcp') seen.mcp++;
          if (s.kind === 'upsert') {
            const body = JSON.parse(JSON.stringify({ email: s.email, role: s.role, permissions: s.permissions }));
            const outcome =
              s.via === 'rest' ? fromRest(await upsert(key, body)) : fromMcp(await mcpTool(key, 'upsert_user', body));
            const badRole = s.role !== undefined && !roleNames.includes(normal(s.role));
            const badPermission = s.permissions ? firstInvalid(s.permissions, permissionNames) : -1;
            const refusedAt = badRole ? 'role' : badPermission >= 0 ? `permissions[${badPermission}]` : undefined;
            check(outcome, refusedAt, known ? 200 : 201);
            if (refusedAt === undefined) {
              const entry = known ?? { id: outcome.record.id, role: 'agent', permissions: new Set<string>() };
              if (s.role !== undefined) entry.role = normal(s.role);
              if (s.permissions) entry.permissions = new Set(s.permissions.map(normal));
              model.set(s.email.toLowerCase(), entry);
            }
          } else if (known) {
            const outcome =
              s.via === 'rest'
                ? fromRest(await addPermissions(key, known.id, { permissions: s.permissions }))
                : fromMcp(
                    await mcpTool(key, 'add_user_permissions', { user_id: known.id, permissions: s.permissions }),
                  );
            const bad = firstInvalid(s.permissions, permissionNames);
            check(outcome, bad >= 0 ? `permissions[${bad}]` : undefined, 200);
            if (bad < 0) for (const p of s.permissions) known.permissions.add(normal(p));
          }
        }
        const users = (await t.call({ url: '/api/v1/users?limit=100', key })).body.data;
        expect(users).toHaveLength(model.size);
        for (const user of users) {
          const expected = model.get(user.email.toLowerCase());
          expect(user.role).toBe(expected?.role);
          expect(names(user).sort()).toEqual([...(expected?.permissions ?? [])].sort());
          expect(roleNames).toContain(user.role);
          for (const name of names(user)) expect(permissionNames).toContain(name);
        }
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from users u
          where u.tenant_id = ${tenantId}
            and (u.role ilike '%admin%'
                 or exists (select 1 from user_permissions p where p.user_id = u.id and p.name ilike '%admin%'))
        `.execute(t.database.db);
        expect(rows[0]?.n).toBe(0);
      }),
      { numRuns: 60 },
    );
    expect(seen.accepted).toBeGreaterThan(20);
    expect(seen.refusedAdmin).toBeGreaterThan(20);
    expect(seen.mcp).toBeGreaterThan(20);
  });
});
