// Webhook endpoints over HTTP (DESIGN.md §7): create with a secret shown once, list,
// get, update, delete, rotate the secret, the SSRF guard on URLs, event-type checks, scopes,
// tenant isolation, and the event catalogue in the OpenAPI document's `webhooks` section.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPE_NAMES } from '../../src/domain/webhooks/event-types.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

// A public address given as an IP, so no DNS is needed; nothing is ever sent in this file.
const PUBLIC_URL = 'https://93.184.215.14/hooks/workspace';

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

async function createEndpoint(key: string, body: Record<string, unknown> = {}) {
  const r = await t.call({
    method: 'POST',
    url: '/api/v1/webhook-endpoints',
    key,
    body: { url: PUBLIC_URL, events: ['user.created'], ...body },
  });
  expect(r.status, r.text).toBe(201);
  return r.body;
}

describe('webhook endpoints', () => {
  it('creating an endpoint answers 201 with a whsec_ secret of 24 random bytes, shown in that answer only', async () => {
    const { key } = await t.tenant();
    const created = await createEndpoint(key, {
      events: ['task.comment.created', 'user.created'],
      description: 'CRM sync',
    });
    expect(created).toMatchObject({
      object: 'webhook_endpoint',
      url: PUBLIC_URL,
      description: 'CRM sync',
      events: ['task.comment.created', 'user.created'],
      enabled: true,
      disabled_reason: null,
      previous_secret_expires_at: null,
    });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(24);

    const got = await t.call({ url: `/api/v1/webhook-endpoints/${created.id}`, key });
    expect(got.status).toBe(200);
    expect(got.body.secret).toBeUndefined();
    expect(got.text).not.toContain(created.secret.slice(6));
    const { secret: _secret, ...withoutSecret } = created;
    expect(got.body).toEqual(withoutSecret);

    const list = await t.call({ url: '/api/v1/webhook-endpoints', key });
    expect(list.body.data).toEqual([withoutSecret]);
    expect(list.text).not.toContain(created.secret.slice(6));
  });

  it('two endpoints never share a secret', async () => {
    const { key } = await t.tenant();
    const a = await createEndpoint(key);
    const b = await createEndpoint(key);
    expect(a.secret).not.toBe(b.secret);
  });

  it('events must be known types or *: an unknown one is 422 validation_error naming events[i]', async () => {
    const { key } = await t.tenant();
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/webhook-endpoints',
      key,
      body: { url: PUBLIC_URL, events: ['user.created', 'user.deleted'] },
    });
    expectError(r, 422, 'validation_error', 'events[1]');
    expect(r.body.error.message).toContain('user.deleted');

    const empty = await t.call({
      method: 'POST',
      url: '/api/v1/webhook-endpoints',
      key,
      body: { url: PUBLIC_URL, events: [] },
    });
    expectError(empty, 422, 'validation_error', 'events');

    const all = await createEndpoint(key, { events: ['*', 'user.created', '*'] });
    expect(all.events).toEqual(['*', 'user.created']);
    const list = await t.call({ url: '/api/v1/webhook-endpoints', key });
    expect(list.body.data).toHaveLength(1);
  });

  it('a missing url or events is 422 missing_required_parameter; unknown fields are refused', async () => {
    const { key } = await t.tenant();
    const noUrl = await t.call({ method: 'POST', url: '/api/v1/webhook-endpoints', key, body: { events: ['*'] } });
    expectError(noUrl, 422, 'missing_required_parameter', 'url');
    const noEvents = await t.call({ method: 'POST', url: '/api/v1/webhook-endpoints', key, body: { url: PUBLIC_URL } });
    expectError(noEvents, 422, 'missing_required_parameter', 'events');
    const extra = await t.call({
      method: 'POST',
      url: '/api/v1/webhook-endpoints',
      key,
      body: { url: PUBLIC_URL, events: ['*'], secret: 'whsec_mine' },
    });
    expectError(extra, 422, 'validation_error', 'secret');
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key })).body.data).toEqual([]);
  });

  it('the url must be an absolute http(s) URL without credentials: else 422 validation_error on url', async () => {
    const { key } = await t.tenant();
    for (const url of [
      'not a url',
      'ftp://93.184.215.14/x',
      'file:///etc/passwd',
      'https://user:pw@93.184.215.14/x',
      `${PUBLIC_URL}#frag`,
    ]) {
      const r = await t.call({ method: 'POST', url: '/api/v1/webhook-endpoints', key, body: { url, events: ['*'] } });
      expectError(r, 422, 'validation_error', 'url');
    }
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key })).body.data).toEqual([]);
  });

  it('SSRF guard: private, loopback and link-local targets are refused with 422 on url (ALLOW_PRIVATE_TARGETS unset)', async () => {
    const { key } = await t.tenant();
    for (const url of [
      'http://127.0.0.1/',
      'http://localhost:8080/hook',
      'http://10.0.0.5/hook',
      'http://192.168.1.10/hook',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[fe80::1]/hook',
    ]) {
      const r = await t.call({ method: 'POST', url: '/api/v1/webhook-endpoints', key, body: { url, events: ['*'] } });
      const error = expectError(r, 422, 'validation_error', 'url');
      expect(error.message).toContain('public');
    }
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key })).body.data).toEqual([]);

    // The same rule holds when the URL is changed later.
    const endpoint = await createEndpoint(key);
    const patched = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { url: 'http://127.0.0.1:9/hook' },
    });
    expectError(patched, 422, 'validation_error', 'url');
    expect((await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key })).body.url).toBe(PUBLIC_URL);
  });

  it('an SSRF refusal names the host that was sent, never the address it resolves to', async () => {
    const { key } = await t.tenant();
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/webhook-endpoints',
      key,
      body: { url: 'http://localhost:8080/hook', events: ['*'] },
    });
    const error = expectError(r, 422, 'validation_error', 'url');
    expect(error.message).toContain('localhost resolves to an address that is not public');
    expect(error.message).not.toMatch(/127\.0\.0\.1|::1/);
  });

  it('PATCH changes url, events, enabled and description; enabling again clears disabled_reason', async () => {
    const { key } = await t.tenant();
    const endpoint = await createEndpoint(key, { description: 'first' });
    const url = 'https://93.184.215.14/other';
    const patched = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { url, events: ['source.sync.failed'], enabled: false, description: null },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      url,
      events: ['source.sync.failed'],
      enabled: false,
      description: null,
      disabled_reason: 'Disabled through the API.',
    });
    const enabled = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { enabled: true },
    });
    expect(enabled.body).toMatchObject({ enabled: true, disabled_reason: null, events: ['source.sync.failed'] });

    const bad = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { events: ['*', 'nope'] },
    });
    expectError(bad, 422, 'validation_error', 'events[1]');
    const unknownField = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { secret: 'x' },
    });
    expectError(unknownField, 422, 'validation_error', 'secret');
    const notBoolean = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { enabled: 'true' },
    });
    expectError(notBoolean, 422, 'validation_error', 'enabled');
    const after = await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
    expect(after.body).toMatchObject({ url, events: ['source.sync.failed'], enabled: true });
  });

  it('rotate-secret answers a new secret once; the old one keeps signing for 24 h (previous_secret_expires_at)', async () => {
    const { key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const before = Date.now();
    const rotated = await t.call({
      method: 'POST',
      url: `/api/v1/webhook-endpoints/${endpoint.id}/rotate-secret`,
      key,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(endpoint.secret);
    const expires = Date.parse(rotated.body.previous_secret_expires_at);
    expect(expires - before).toBeGreaterThanOrEqual(24 * 3_600_000 - 1000);
    expect(expires - before).toBeLessThanOrEqual(24 * 3_600_000 + 60_000);
    const got = await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
    expect(got.body.previous_secret_expires_at).toBe(rotated.body.previous_secret_expires_at);
    expect(got.body.secret).toBeUndefined();
  });

  it('DELETE removes the endpoint: 200 deleted, then 404 not_found', async () => {
    const { key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const deleted = await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: endpoint.id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key }), 404, 'not_found');
    expectError(
      await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key }),
      404,
      'not_found',
    );
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key })).body.data).toEqual([]);
  });

  it('unknown or malformed ids answer 404 not_found', async () => {
    const { key } = await t.tenant();
    const missing = '0190a000-0000-7000-8000-000000000000';
    for (const url of [
      `/api/v1/webhook-endpoints/${missing}`,
      '/api/v1/webhook-endpoints/not-a-uuid',
      `/api/v1/webhook-endpoints/${missing}/deliveries`,
      `/api/v1/webhook-deliveries/${missing}`,
    ]) {
      expectError(await t.call({ url, key }), 404, 'not_found');
    }
    expectError(
      await t.call({ method: 'POST', url: `/api/v1/webhook-endpoints/${missing}/rotate-secret`, key }),
      404,
      'not_found',
    );
    expectError(
      await t.call({ method: 'POST', url: `/api/v1/webhook-deliveries/${missing}/replay`, key }),
      404,
      'not_found',
    );
  });

  it('lists page newest first with limit and cursor', async () => {
    const { key } = await t.tenant();
    const first = await createEndpoint(key);
    const second = await createEndpoint(key);
    const page1 = await t.call({ url: '/api/v1/webhook-endpoints?limit=1', key });
    expect(page1.body.data.map((e: { id: string }) => e.id)).toEqual([second.id]);
    expect(page1.body.has_more).toBe(true);
    const page2 = await t.call({ url: `/api/v1/webhook-endpoints?limit=1&cursor=${page1.body.next_cursor}`, key });
    expect(page2.body.data.map((e: { id: string }) => e.id)).toEqual([first.id]);
    expect(page2.body.has_more).toBe(false);
  });
});

describe('webhook scopes and tenancy', () => {
  it('webhooks:read lists and gets; every change needs webhooks:write (403 insufficient_scope)', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const reader = await t.key(tenantId, ['webhooks:read']);
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key: reader })).status).toBe(200);
    expect((await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key: reader })).status).toBe(200);
    expect((await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}/deliveries`, key: reader })).status).toBe(
      200,
    );
    const writes = [
      { method: 'POST' as const, url: '/api/v1/webhook-endpoints', body: { url: PUBLIC_URL, events: ['*'] } },
      { method: 'PATCH' as const, url: `/api/v1/webhook-endpoints/${endpoint.id}`, body: { enabled: false } },
      { method: 'DELETE' as const, url: `/api/v1/webhook-endpoints/${endpoint.id}` },
      { method: 'POST' as const, url: `/api/v1/webhook-endpoints/${endpoint.id}/rotate-secret` },
      { method: 'POST' as const, url: '/api/v1/webhook-deliveries/0190a000-0000-7000-8000-000000000000/replay' },
    ];
    for (const write of writes) {
      expectError(await t.call({ ...write, key: reader }), 403, 'insufficient_scope');
    }
    // Nothing changed.
    const after = await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key: reader });
    expect(after.body).toMatchObject({ enabled: true, previous_secret_expires_at: null });
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key: reader })).body.data).toHaveLength(1);

    const other = await t.key(tenantId, ['tasks:write', 'accounts:write']);
    expectError(await t.call({ url: '/api/v1/webhook-endpoints', key: other }), 403, 'insufficient_scope');
    const writer = await t.key(tenantId, ['webhooks:write']);
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key: writer })).status).toBe(200);
  });

  it("a tenant never sees or changes another tenant's endpoints: 404 not_found", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const endpoint = await createEndpoint(a.key);
    const id = endpoint.id;
    for (const call of [
      { url: `/api/v1/webhook-endpoints/${id}` },
      { url: `/api/v1/webhook-endpoints/${id}/deliveries` },
      { method: 'PATCH' as const, url: `/api/v1/webhook-endpoints/${id}`, body: { enabled: false } },
      { method: 'POST' as const, url: `/api/v1/webhook-endpoints/${id}/rotate-secret` },
      { method: 'DELETE' as const, url: `/api/v1/webhook-endpoints/${id}` },
    ]) {
      expectError(await t.call({ ...call, key: b.key }), 404, 'not_found');
    }
    expect((await t.call({ url: '/api/v1/webhook-endpoints', key: b.key })).body.data).toEqual([]);
    const still = await t.call({ url: `/api/v1/webhook-endpoints/${id}`, key: a.key });
    expect(still.body).toMatchObject({ id, enabled: true, previous_secret_expires_at: null });
  });
});

describe('webhook events in the OpenAPI document', () => {
  it('the webhooks section lists every event type with its Standard Webhooks headers and payload schema', async () => {
    const r = await t.call({ url: '/api/v1/openapi.json' });
    expect(r.status).toBe(200);
    const doc = r.body;
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);

    const required = [
      'task.comment.created',
      'task.link.created',
      'source.sync.completed',
      'source.sync.failed',
      'simulation.run.completed',
      'coverage.evaluation.completed',
      'knowledge_update_request.created',
      'conversation.turn.waiting_client',
      'user.created',
      'user.permissions.changed',
    ];
    expect(EVENT_TYPE_NAMES).toEqual(expect.arrayContaining(required));
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPE_NAMES].sort());
    for (const type of EVENT_TYPE_NAMES) {
      const post = doc.webhooks[type].post;
      expect(post.parameters.map((p: { name: string }) => p.name)).toEqual([
        'webhook-id',
        'webhook-timestamp',
        'webhook-signature',
      ]);
      const schema = post.requestBody.content['application/json'].schema;
      expect(schema.required).toEqual(['id', 'type', 'created_at', 'data']);
      expect(schema.properties.type.const).toBe(type);
      expect(schema.properties.data.type).toBe('object');
    }
    const comment = doc.webhooks['task.comment.created'].post.requestBody.content['application/json'].schema;
    expect(comment.properties.data.properties.comment.properties.mentions.type).toBe('array');
  });
});
