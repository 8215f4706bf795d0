// The OpenAPI document (spec: Versioning; DESIGN.md §6): valid OpenAPI 3.1.0, version 1.0.0,
// the ScopedAPIKeyAuth scheme, every registry operation with its scope and error answers.
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../src/domain/accounts/scopes.js';
import { OPERATIONS } from '../../src/operations/index.js';
import { ADMIN_TOKEN, type CallResult, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
// biome-ignore lint/suspicious/noExplicitAny: the document is read loosely.
let doc: any;

beforeAll(async () => {
  // A small body limit, so that a 413 is cheap to provoke.
  t = await startTestApp({ BODY_LIMIT_BYTES: '65536' });
  const r = await t.call({ url: '/api/v1/openapi.json' });
  expect(r.status).toBe(200);
  doc = r.body;
});
afterAll(() => t.close());

const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');

describe('OpenAPI document', () => {
  it('validates as OpenAPI 3.1 with info.version 1.0.0', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('declares the ScopedAPIKeyAuth scheme (apiKey in the X-API-Key header)', () => {
    expect(doc.components.securitySchemes.ScopedAPIKeyAuth).toMatchObject({
      type: 'apiKey',
      in: 'header',
      name: 'X-API-Key',
    });
  });

  it('the API-key scheme lists the scope catalogue, and every scope an operation requires is in it', () => {
    const listed = doc.components.securitySchemes.ScopedAPIKeyAuth['x-scopes'];
    expect(Object.keys(listed).sort()).toEqual([...ALL_SCOPES].sort());
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item as Record<string, { security?: object[] }>)) {
        for (const requirement of operation.security ?? []) {
          for (const scope of (requirement as { ScopedAPIKeyAuth?: string[] }).ScopedAPIKeyAuth ?? []) {
            expect(listed[scope], `${method} ${path}: ${scope}`).toEqual(expect.any(String));
          }
        }
      }
    }
  });

  it('declares every tag its operations and webhooks use, each with a description', () => {
    const used = new Set(
      [...Object.values(doc.paths), ...Object.values(doc.webhooks)].flatMap((item) =>
        Object.values(item as Record<string, { tags?: string[] }>).flatMap((operation) => operation.tags ?? []),
      ),
    );
    expect(used.size).toBeGreaterThan(5);
    expect(new Set(doc.tags.map((tag: { name: string }) => tag.name))).toEqual(used);
    for (const tag of doc.tags) expect(tag.description, tag.name).toEqual(expect.stringMatching(/\S/));
  });

  it('every operation has a description', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item as Record<string, { description?: string }>)) {
        expect(operation.description, `${method} ${path}`).toEqual(expect.stringMatching(/\S/));
      }
    }
  });

  it('info names a contact and a licence, and links the error catalogue', () => {
    expect(doc.info.contact.name).toEqual(expect.any(String));
    expect(doc.info.license).toMatchObject({ name: expect.any(String), identifier: expect.any(String) });
    expect(doc.info.description).toContain('](/docs/errors)');
  });

  it('the outgoing webhooks take no security scheme (their signature headers are declared instead)', () => {
    expect(Object.keys(doc.webhooks).length).toBeGreaterThan(0);
    for (const [name, item] of Object.entries(doc.webhooks as Record<string, { post: Record<string, unknown> }>)) {
      expect(item.post.security, name).toEqual([]);
      expect(item.post.parameters, name).toEqual(
        expect.arrayContaining([expect.objectContaining({ in: 'header', required: true })]),
      );
    }
  });

  it('documents every registry operation under /api/v1 with its scope and its error answers', () => {
    expect(OPERATIONS.length).toBeGreaterThan(0);
    for (const op of OPERATIONS) {
      expect(op.path.startsWith('/api/v1/')).toBe(true);
      const entry = doc.paths[openApiPath(op.path)]?.[op.method.toLowerCase()];
      expect(entry, `${op.method} ${op.path}`).toBeDefined();
      expect(entry.operationId).toBe(op.id);
      expect(entry.security).toEqual([{ ScopedAPIKeyAuth: [op.scope] }]);
      // 413: headers over 16 KB reach any operation, and a body over the limit any that is sent one.
      for (const status of ['401', '403', '413', '422', '429', '500', '503']) {
        expect(entry.responses[status], `${op.id} ${status}`).toBeDefined();
      }
      if (op.params) expect(entry.responses['404'], `${op.id} 404`).toBeDefined();
      expect(entry.responses[String(op.status ?? 200)]).toBeDefined();
    }
  });

  it('every POST taking a key takes Idempotency-Key, may answer 409, and says when an answer is a replay', () => {
    const posts = Object.entries(doc.paths).flatMap(([path, item]) =>
      // biome-ignore lint/suspicious/noExplicitAny: the document is read loosely.
      (item as any).post?.security?.some((s: object) => 'ScopedAPIKeyAuth' in s) ? [[path, (item as any).post]] : [],
    );
    expect(posts.map(([path]) => path)).toEqual(expect.arrayContaining(['/api/v1/tasks', '/api/v1/mcp']));
    for (const [path, post] of posts) {
      expect(
        post.parameters.find((p: { name: string }) => p.name === 'Idempotency-Key'),
        path,
      ).toMatchObject({ in: 'header', required: false, schema: { minLength: 1, maxLength: 255 } });
      // Every success with a body (an empty 202 is not stored, so never replayed).
      const success = Object.keys(post.responses).filter(
        (status) => status.startsWith('2') && post.responses[status].content,
      );
      expect(success.length, path).toBeGreaterThan(0);
      for (const status of success) expect(post.responses[status].headers?.['Idempotent-Replayed'], path).toBeDefined();
      expect(post.responses['409'], path).toBeDefined();
    }
  });

  it('a body none of whose fields is required may be left out; one with a required field may not', () => {
    expect(doc.paths['/api/v1/sources/{source_id}'].put.requestBody.required).toBe(false);
    expect(doc.paths['/api/v1/webhook-endpoints/{endpoint_id}'].patch.requestBody.required).toBe(false);
    expect(doc.paths['/api/v1/tasks'].post.requestBody.required).toBe(true);
  });

  it('a query parameter with a default (limit) is optional to clients', () => {
    const limit = doc.paths['/api/v1/apps'].get.parameters.find((p: { name: string }) => p.name === 'limit');
    expect(limit).toMatchObject({ in: 'query', required: false, schema: { default: 20 } });
  });

  it('operation ids are unique', () => {
    const ids = OPERATIONS.map((op) => op.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('serves the docs page at /docs', async () => {
    const page = await t.call({ url: '/docs/' });
    expect(page.status).toBe(200);
    expect(page.text).toContain('swagger');
  });
});

// What the server really answers, checked against what the document declares for it: a client
// generated from the document must be able to read every answer.
const UNKNOWN_ID = '0b9b7c1e-1111-4222-8333-444455556666';

// biome-ignore lint/suspicious/noExplicitAny: the document is read loosely.
function declared(method: string, path: string, status: number): any {
  const response = doc.paths[path]?.[method.toLowerCase()]?.responses?.[String(status)];
  const ref = response?.$ref as string | undefined;
  return ref ? doc.components.responses[ref.replace('#/components/responses/', '')] : response;
}

let ajv: Ajv | undefined;
/** Whether a JSON body matches a schema of the document (its `#/components/…` references resolved). */
function matches(schema: unknown, body: unknown): string | undefined {
  if (!ajv) {
    ajv = new Ajv({ strict: false, allErrors: false });
    addFormats.default(ajv);
    ajv.addSchema({ components: doc.components }, 'doc');
  }
  const validate = ajv.compile(JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, '"doc#/components/')));
  return validate(body) ? undefined : ajv.errorsText(validate.errors);
}

/**
 * Asserts that the document declares this answer of `method path`: its status, its media type
 * (or no content, for an empty body), and a JSON body that matches the declared schema. Returns
 * the declared response.
 */
function expectDeclaredAnswer(method: string, path: string, r: Pick<CallResult, 'status' | 'headers' | 'text'>) {
  const where = `${method} ${path} → ${r.status} ${r.text.slice(0, 120)}`;
  const response = declared(method, path, r.status);
  expect(response, `${where}: status not declared`).toBeDefined();
  const media =
    String(r.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim() ?? '';
  if (media === '') {
    expect(r.text, where).toBe('');
    expect(response.content, `${where}: declares a body`).toBeUndefined();
  } else {
    const content = response.content?.[media];
    expect(content, `${where}: ${media} not declared`).toBeDefined();
    if (media === 'application/json') expect(matches(content.schema, JSON.parse(r.text)), where).toBeUndefined();
  }
  // The headers the README promises, when the answer carries them, are declared (by reference).
  for (const name of ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']) {
    if (r.headers[name.toLowerCase()] === undefined) continue;
    expect(response.headers?.[name], `${where}: ${name} not declared`).toEqual({
      $ref: `#/components/headers/${name}`,
    });
  }
  if (r.headers['idempotent-replayed'] !== undefined) {
    expect(response.headers?.['Idempotent-Replayed'], `${where}: Idempotent-Replayed not declared`).toBeDefined();
  }
  return response;
}

describe('the document declares what the server answers', () => {
  it('an unknown conversation_id in a message answers 404 not_found, which POST /messages declares', async () => {
    const { key } = await t.tenant();
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key,
      body: { content: 'hello', conversation_id: UNKNOWN_ID },
    });
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ code: 'not_found', param: 'conversation_id' });
    expect(declared('POST', '/api/v1/messages', 404)).toBeDefined();
  });
});

describe('the message turns stream when asked', () => {
  for (const path of ['/api/v1/messages', '/api/v1/messages/{message_id}/continue']) {
    it(`POST ${path} declares its 200 as application/json first, then text/event-stream`, () => {
      const content = declared('POST', path, 200).content;
      expect(Object.keys(content)).toEqual(['application/json', 'text/event-stream']);
      expect(content['text/event-stream'].schema).toMatchObject({ type: 'string' });
      expect(content['text/event-stream'].schema.description).toContain('docs/agent.md');
    });
  }

  it('with Accept: text/event-stream, POST /messages answers 200 text/event-stream, as declared', async () => {
    const { key } = await t.tenant();
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key,
      body: { content: 'hello' },
      headers: { accept: 'text/event-stream' },
    });
    expect(r.status).toBe(200);
    const type = String(r.headers['content-type']).split(';')[0] as string;
    expect(type).toBe('text/event-stream');
    expect(r.text).toContain('event: done');
    expect(declared('POST', '/api/v1/messages', 200).content[type]).toBeDefined();
    // Like every answer the rate limit counts (docs/api.md: Rate limits), the stream carries its headers.
    for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'x-request-id']) {
      expect(r.headers[name], name).toBeDefined();
    }
  });
});

describe('the MCP endpoint declares every status it answers', () => {
  const ACCEPT = 'application/json, text/event-stream';
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  const post = (key: string | undefined, payload: string, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/mcp',
      headers: { 'content-type': 'application/json', accept: ACCEPT, ...(key ? { 'x-api-key': key } : {}), ...headers },
      payload,
    });

  it('POST: each request answers the status observed, with a body of the declared shape', async () => {
    const { key } = await t.tenant();
    // request → the status it really answers, and the error code (JSON-RPC's, or the spec's)
    const table: [string, () => ReturnType<typeof post>, number, (number | string)?][] = [
      ['a request', () => post(key, ping), 200],
      ['a batch (2025-03-26)', () => post(key, `[${ping}]`), 200],
      ['a notification', () => post(key, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })), 202],
      ['a body that is not JSON', () => post(key, '{'), 400, -32700],
      ['JSON that is not JSON-RPC', () => post(key, '{"a":1}'), 400, -32600],
      [
        'an unsupported MCP-Protocol-Version',
        () => post(key, ping, { 'mcp-protocol-version': '1999-01-01' }),
        400,
        -32000,
      ],
      ['a content type other than JSON', () => post(key, ping, { 'content-type': 'text/plain' }), 400, 'bad_request'],
      ['no key', () => post(undefined, ping), 401, 'not_authenticated'],
      ['an unknown key', () => post('wsk_unknown', ping), 401, 'invalid_api_key'],
      ['an Origin not allowed', () => post(key, ping, { origin: 'https://evil.example' }), 403, 'forbidden_origin'],
      ['Accept of neither JSON nor a stream', () => post(key, ping, { accept: 'text/html' }), 406, -32000],
      [
        'a body over BODY_LIMIT_BYTES',
        () => post(key, ping.replace('}', `,"x":"${'y'.repeat(70_000)}"}`)),
        413,
        'request_too_large',
      ],
      [
        'an Idempotency-Key over 255 characters',
        () => post(key, ping, { 'idempotency-key': 'k'.repeat(256) }),
        422,
        'validation_error',
      ],
      [
        'an Idempotency-Key used with another body',
        () => post(key, '{"jsonrpc":"2.0","id":2,"method":"ping"}', { 'idempotency-key': 'used' }),
        409,
        'conflict',
      ],
    ];
    expect((await post(key, ping, { 'idempotency-key': 'used' })).statusCode).toBe(200);
    for (const [name, send, status, code] of table) {
      const r = await send();
      const text = r.body;
      expect(r.statusCode, `${name}: ${text.slice(0, 200)}`).toBe(status);
      expectDeclaredAnswer('POST', '/api/v1/mcp', { status: r.statusCode, headers: r.headers, text });
      if (typeof code === 'number') expect(JSON.parse(text).error.code, name).toBe(code);
      if (typeof code === 'string') expect(JSON.parse(text).error.code, name).toBe(code);
    }
  });

  it('GET: the stream is declared as text/event-stream; its refusals are declared', async () => {
    const { key } = await t.tenant();
    const stream = await t.app.inject({
      method: 'GET',
      url: '/api/v1/mcp',
      headers: { 'x-api-key': key },
      payloadAsStream: true,
    });
    expect(stream.statusCode).toBe(200);
    stream.stream().destroy();
    expectDeclaredAnswer('GET', '/api/v1/mcp', { status: 200, headers: stream.headers, text: '(a stream)' });
    for (const [headers, status] of [
      [{}, 401],
      [{ 'x-api-key': key, origin: 'https://evil.example' }, 403],
    ] as const) {
      const r = await t.call({ url: '/api/v1/mcp', headers });
      expect(r.status).toBe(status);
      expectDeclaredAnswer('GET', '/api/v1/mcp', r);
    }
    // No other method is served (Streamable HTTP's DELETE ends a session; there are none).
    expect(Object.keys(doc.paths['/api/v1/mcp']).sort()).toEqual(['get', 'post']);
    expect((await t.call({ method: 'DELETE', url: '/api/v1/mcp', key })).status).toBe(404);
  });
});

describe('a rate-limited answer is declared', () => {
  let limited: TestApp;
  let key: string;
  beforeAll(async () => {
    limited = await startTestApp({
      RATE_LIMIT_PER_MINUTE: '3',
      BASE_DOMAIN: 'workspace.example',
      PUBLIC_URL: 'https://api.workspace.example',
    });
    ({ key } = await limited.tenant());
    // Past the budget: the tenant and key creation above spent two requests, this the third.
    await limited.call({ url: '/api/v1/apps', key });
  });
  afterAll(() => limited.close());

  it('the servers follow BASE_DOMAIN, and PUBLIC_URL when it is set (the document is not limited)', async () => {
    const own = (await limited.call({ url: '/api/v1/openapi.json' })).body;
    expect(own.servers.map((server: { url: string }) => server.url)).toEqual([
      '/',
      'https://{tenant_id}.{base_domain}',
      'https://api.workspace.example',
    ]);
    expect(own.servers[1].variables.base_domain.default).toBe('workspace.example');
    expect(own.info.contact.url).toBe('https://api.workspace.example');
  });

  const requests: [string, string, Parameters<TestApp['call']>[0]][] = [
    ['POST', '/api/v1/mcp', { method: 'POST', url: '/api/v1/mcp', body: { jsonrpc: '2.0', id: 1, method: 'ping' } }],
    ['GET', '/api/v1/mcp', { url: '/api/v1/mcp' }],
    ['GET', '/api/v1/apps', { url: '/api/v1/apps' }],
    ['GET', '/admin/v1/tenants', { url: '/admin/v1/tenants', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }],
  ];
  for (const [method, path, request] of requests) {
    it(`${method} ${path}: 429 rate_limit_exceeded`, async () => {
      const r = await limited.call({
        ...request,
        key,
        headers: { accept: 'application/json, text/event-stream', ...request.headers },
      });
      expect(r.status).toBe(429);
      expect(r.body.error.code).toBe('rate_limit_exceeded');
      expectDeclaredAnswer(method, path, r);
    });
  }
});

describe('the control plane declares what every route of it answers', () => {
  it('a body over BODY_LIMIT_BYTES answers 413, declared', async () => {
    const r = await t.call({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      body: { tenant_id: 'too-large', name: 'x'.repeat(70_000) },
    });
    expect(r.status).toBe(413);
    expectDeclaredAnswer('POST', '/admin/v1/tenants', r);
  });

  it('every /admin/v1 operation declares 400, 401, 413, 422, 429 and 500', () => {
    const admin = Object.entries(doc.paths).filter(([path]) => path.startsWith('/admin/v1/'));
    expect(admin.length).toBeGreaterThan(5);
    for (const [path, item] of admin) {
      for (const [method, operation] of Object.entries(item as Record<string, { responses: object }>)) {
        for (const status of ['400', '401', '413', '422', '429', '500']) {
          expect(operation.responses, `${method} ${path}`).toHaveProperty(status);
        }
      }
    }
  });
});

describe('response headers', () => {
  it('are declared once, under components.headers', () => {
    expect(Object.keys(doc.components.headers).sort()).toEqual([
      'Idempotent-Replayed',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'Retry-After',
      'X-Request-Id',
    ]);
  });

  it('every response of every operation declares X-Request-Id and RateLimit-*, and every 429 and 503 Retry-After', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item as Record<string, { responses: object }>)) {
        for (const status of Object.keys(operation.responses)) {
          const headers = declared(method, path, Number(status)).headers ?? {};
          const names = ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
          if (status === '429' || status === '503') names.push('Retry-After');
          for (const name of names) expect(headers[name], `${method} ${path} ${status} ${name}`).toBeDefined();
        }
      }
    }
  });

  it('an answer carries X-Request-Id and RateLimit-*, declared for it; a success and an error alike', async () => {
    const { key } = await t.tenant();
    for (const [url, status] of [
      ['/api/v1/apps', 200],
      [`/api/v1/workflows/${UNKNOWN_ID}`, 404],
    ] as const) {
      const r = await t.call({ url, key });
      expect(r.status).toBe(status);
      for (const name of ['x-request-id', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
        expect(r.headers[name], `${url} ${name}`).toBeDefined();
      }
      expectDeclaredAnswer('GET', url === '/api/v1/apps' ? url : '/api/v1/workflows/{workflow_id}', r);
    }
  });

  it('a replayed answer, a 4xx as a 2xx, carries Idempotent-Replayed, which its response declares', async () => {
    const { key } = await t.tenant();
    const replays: [string, unknown, number][] = [
      ['/api/v1/apps', { name: 'replayed' }, 201],
      ['/api/v1/messages', { content: 'hello', conversation_id: UNKNOWN_ID }, 404],
      ['/api/v1/apps', { name: 'replayed' }, 409],
      ['/api/v1/tasks', { title: 'x', assignee_id: UNKNOWN_ID }, 422],
      ['/api/v1/mcp', { a: 1 }, 400],
    ];
    for (const [index, [url, body, status]] of replays.entries()) {
      const headers = { 'idempotency-key': `replay-${index}`, accept: 'application/json, text/event-stream' };
      const first = await t.call({ method: 'POST', url, key, body, headers });
      expect(first.status, `${url} ${first.text}`).toBe(status);
      const again = await t.call({ method: 'POST', url, key, body, headers });
      expect(again.status).toBe(status);
      expect(again.headers['idempotent-replayed'], url).toBe('true');
      expectDeclaredAnswer('POST', url, again);
    }
    // An empty answer is not stored: a repeat runs again, and its 202 is declared without the header.
    const notification = { jsonrpc: '2.0', method: 'notifications/initialized' };
    const headers = { 'idempotency-key': 'replay-empty', accept: 'application/json, text/event-stream' };
    await t.call({ method: 'POST', url: '/api/v1/mcp', key, body: notification, headers });
    const again = await t.call({ method: 'POST', url: '/api/v1/mcp', key, body: notification, headers });
    expect(again.status).toBe(202);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(declared('POST', '/api/v1/mcp', 202).headers['Idempotent-Replayed']).toBeUndefined();
  });

  it('Idempotent-Replayed is declared only on operations that take an Idempotency-Key', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(
        item as Record<string, { parameters?: { name: string }[]; responses: object }>,
      )) {
        const keyed = operation.parameters?.some((p) => p.name === 'Idempotency-Key') ?? false;
        const replayable = Object.keys(operation.responses).filter(
          (status) => declared(method, path, Number(status)).headers?.['Idempotent-Replayed'],
        );
        if (!keyed) expect(replayable, `${method} ${path}`).toEqual([]);
        // Never on a refusal before the operation runs, nor on a 5xx: those are not stored.
        else for (const status of ['401', '403', '413', '429', '500']) expect(replayable).not.toContain(status);
      }
    }
  });
});

describe('servers', () => {
  it("name first the host serving the document (where /docs tries requests), then a tenant's own host", () => {
    expect(doc.servers[0].url).toBe('/');
    expect(doc.servers[1]).toMatchObject({
      url: 'https://{tenant_id}.{base_domain}',
      variables: { tenant_id: { default: 'demo' }, base_domain: { default: t.config.baseDomain } },
    });
  });

  it("a tenant's host serves its keys and refuses another tenant's; a bare host serves the key's tenant", async () => {
    const mine = await t.tenant();
    const theirs = await t.tenant();
    const host = (tenantId: string) => `${tenantId}.${t.config.baseDomain}`;
    const on = (hostName: string, key: string) => t.call({ url: '/api/v1/apps', key, headers: { host: hostName } });
    expect((await on(host(mine.tenantId), mine.key)).status).toBe(200);
    expect((await on(host(mine.tenantId), theirs.key)).status).toBe(401);
    expect((await on(t.config.baseDomain, theirs.key)).status).toBe(200);
  });
});
