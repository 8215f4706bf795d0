// The OpenAPI document (spec: Versioning; DESIGN.md §6): valid OpenAPI 3.1.0, version 1.0.0,
// the ScopedAPIKeyAuth scheme, every registry operation with its scope and error answers.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../src/operations/index.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
// biome-ignore lint/suspicious/noExplicitAny: the document is read loosely.
let doc: any;

beforeAll(async () => {
  t = await startTestApp();
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
    expect(doc.components.securitySchemes.ScopedAPIKeyAuth).toEqual({
      type: 'apiKey',
      in: 'header',
      name: 'X-API-Key',
    });
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
      for (const status of ['401', '403', '413', '422', '429', '500']) {
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
      const success = Object.keys(post.responses).filter((status) => status.startsWith('2'));
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
    // Like every answer the rate limit counts (README: Rate limits), the stream carries its headers.
    for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'x-request-id']) {
      expect(r.headers[name], name).toBeDefined();
    }
  });
});
