// The HTTP contract every operation shares (spec: Errors, Limits; DESIGN.md §4–5): the error
// body, malformed input, bounds, limits, request ids, rate limiting and Idempotency-Key.
import { type AddressInfo, connect } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let key: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ key } = await t.tenant());
  await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'web' } });
});
afterAll(() => t.close());

const commit = (body: unknown, headers: Record<string, string> = {}) =>
  t.call({ method: 'POST', url: '/api/v1/apps/web/commits', key, body, headers });
const file = { path: 'a.txt', content: 'x' };
/** A POST whose body is sent as the text given, as JSON: for bodies a client could not build from an object. */
const postJson = (url: string, text: string) =>
  t.call({ method: 'POST', url, key, body: text, headers: { 'content-type': 'application/json' } });

describe('malformed requests', () => {
  it('invalid JSON answers 400 bad_request', async () => {
    const r = await postJson('/api/v1/apps', '{"name": ');
    expectError(r, 400, 'bad_request');
  });

  it('a body that is not UTF-8, or says it is in another charset, answers 400 bad_request and stores nothing', async () => {
    const send = (payload: Buffer, contentType = 'application/json') =>
      t.call({ method: 'POST', url: '/api/v1/tasks', key, body: payload, headers: { 'content-type': contentType } });
    // "café" in Latin-1: 0xE9 is no UTF-8; decoded loosely it would be stored as "caf\uFFFD".
    const latin1 = Buffer.from('{"title":"caf\u00e9-latin1"}', 'latin1');
    expect(expectError(await send(latin1), 400, 'bad_request').message).toBe('The request body is not valid UTF-8.');
    const declared = await send(Buffer.from('{"title":"plain"}'), 'application/json; charset=ISO-8859-1');
    expect(expectError(declared, 400, 'bad_request').message).toContain("not charset 'ISO-8859-1'");
    const tasks = await t.call({ url: '/api/v1/tasks?limit=100', key });
    expect(tasks.body.data.map((task: { title: string }) => task.title)).not.toContain('plain');
    expect(JSON.stringify(tasks.body)).not.toContain('\uFFFD');

    // UTF-8, said or not, with or without a byte order mark, is read as sent.
    expect((await send(Buffer.from('{"title":"caf\u00e9"}'), 'application/json; charset=utf-8')).body.title).toBe(
      'caf\u00e9',
    );
    expect((await send(Buffer.from('{"title":"na\u00efve"}'), 'application/json;charset="UTF8"')).body.title).toBe(
      'na\u00efve',
    );
    expect((await send(Buffer.from('\uFEFF{"title":"bom"}'))).body.title).toBe('bom');
  });

  it('a 404 names the parameter that named nothing, whether the id is malformed or unknown', async () => {
    const unknownId = '01a20f42-9497-7075-b989-f4ba6999c9b1';
    const notFound = async (r: Awaited<ReturnType<typeof t.call>>, param: string) =>
      expect(expectError(r, 404, 'not_found').param).toBe(param);
    await notFound(await t.call({ method: 'PUT', url: `/api/v1/sources/${unknownId}`, key, body: {} }), 'source_id');
    await notFound(await t.call({ method: 'PUT', url: '/api/v1/sources/not-a-uuid', key, body: {} }), 'source_id');
    const comment = { method: 'POST', key, body: { content: 'x' } } as const;
    await notFound(await t.call({ ...comment, url: '/api/v1/tasks/TASK-99999/comments' }), 'task_id');
    const ds = await t.call({
      method: 'POST',
      url: '/api/v1/custom-data-sources',
      key,
      body: { name: 'N', slug: 'nf' },
    });
    expect(ds.status).toBe(201);
    await notFound(await t.call({ url: '/api/v1/custom-data-sources/nf/rows/nope', key }), 'external_id');
    await notFound(await t.call({ url: '/api/v1/custom-data-sources/NOPE/rows/nope', key }), 'id_or_slug');
    // Named in the body: the conversation a message is sent to.
    const message = { content: 'hello', conversation_id: unknownId.toUpperCase() };
    await notFound(await t.call({ method: 'POST', url: '/api/v1/messages', key, body: message }), 'conversation_id');
  });

  it('a content type other than JSON answers 400 bad_request', async () => {
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/apps',
      key,
      body: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectError(r, 400, 'bad_request');
  });

  it('a body that is not a JSON object answers 400 bad_request', async () => {
    expectError(await t.call({ method: 'POST', url: '/api/v1/apps', key, body: [1, 2] }), 400, 'bad_request');
    expectError(await postJson('/api/v1/apps', '"text"'), 400, 'bad_request');
  });

  it('a JSON null is a body that is not an object (400), not a missing one', async () => {
    const r = await postJson('/api/v1/apps', 'null');
    expectError(r, 400, 'bad_request');
  });

  it('an operation that takes no body refuses one, rather than ignoring it; {} and no body are fine', async () => {
    const source = await t.call({
      method: 'POST',
      url: '/api/v1/sources',
      key,
      body: { name: 'S', source_type: 'manual' },
    });
    const sync = `/api/v1/sources/${source.body.id}/sync`;
    expectError(
      await t.call({ method: 'POST', url: sync, key, body: { force: true } }),
      422,
      'validation_error',
      'force',
    );
    expectError(await t.call({ method: 'POST', url: sync, key, body: [1] }), 400, 'bad_request');
    // Plain text is not JSON, body or not (Fastify's own text/plain parser would take it).
    for (const url of [sync, '/api/v1/apps']) {
      const r = await t.call({ method: 'POST', url, key, body: 'hello', headers: { 'content-type': 'text/plain' } });
      expectError(r, 400, 'bad_request');
    }
    expectError(await postJson(sync, 'null'), 400, 'bad_request');
    expect((await t.call({ method: 'POST', url: sync, key, body: {} })).status).toBe(202);
    expect((await t.call({ method: 'POST', url: sync, key })).status).toBe(202);
  });

  it('a body nesting more than 64 levels answers 422 naming the field, not a stack overflow; 64 are fine', async () => {
    const nest = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    // {"name": …, "description": <n arrays>}: the body object is one level, the arrays the rest.
    const deep = `{"name":"deep","description":${nest(5000)}}`;
    for (const headers of [{}, { 'idempotency-key': 'deep-1' }] as Record<string, string>[]) {
      const r = await t.call({
        method: 'POST',
        url: '/api/v1/apps',
        key,
        body: deep,
        headers: { 'content-type': 'application/json', ...headers },
      });
      expectError(r, 422, 'validation_error', 'description');
      expect(r.body.error.message).toBe('description nests more than 64 levels deep.');
    }
    // At the bound the body is parsed and reaches validation (a description is a string).
    const atBound = await postJson('/api/v1/apps', `{"name":"deep","description":${nest(63)}}`);
    expectError(atBound, 422, 'validation_error', 'description');
    const mcp = await t.call({
      method: 'POST',
      url: '/api/v1/mcp',
      key,
      body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_apps","arguments":${nest(5000)}}}`,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    });
    expect(mcp.status).toBe(400);
    expect(mcp.body.error).toMatchObject({ code: -32600 });
  });

  it('no body at all reads as an empty object: the first missing required field is named', async () => {
    expectError(await postJson('/api/v1/apps', ''), 422, 'missing_required_parameter', 'name');
    expectError(await t.call({ method: 'POST', url: '/api/v1/apps', key }), 422, 'missing_required_parameter', 'name');
  });

  it('__proto__ and constructor.prototype keys are refused, not merged, and named', async () => {
    const r = await postJson('/api/v1/apps', '{"name":"p","__proto__":{"admin":true}}');
    expect(expectError(r, 400, 'bad_request').param).toBe('__proto__');
    const nested = await postJson(
      '/api/v1/sources',
      '{"name":"x","source_type":"manual","additional_info":{"constructor":{"prototype":{"a":1}}}}',
    );
    expect(expectError(nested, 400, 'bad_request')).toMatchObject({
      param: 'additional_info.constructor',
      message: expect.stringContaining('not accepted'),
    });
    // A key named constructor without a prototype in it is data like any other.
    const plain = await postJson(
      '/api/v1/sources',
      '{"name":"y","source_type":"manual","additional_info":{"constructor":"Acme"}}',
    );
    expect(plain.status, plain.text).toBe(201);
  });

  it("requests Node's HTTP parser refuses answer in the error shape too (400, 413 for oversized headers)", async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.end(request));
        let answer = '';
        socket.on('data', (chunk) => {
          answer += chunk;
        });
        socket.on('close', () => resolve(answer));
        socket.on('error', reject);
      });
    const cases: [string, number, string][] = [
      ['POST /api/v1/apps HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400, 'bad_request'],
      ['GET /api/v1/apps HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 400, 'bad_request'],
      [`GET /api/v1/apps HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 413, 'request_too_large'],
    ];
    for (const [request, status, code] of cases) {
      const answer = await raw(request);
      const [head, body] = answer.split('\r\n\r\n');
      expect(head).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(head).toContain('application/json');
      expect(JSON.parse(body as string).error).toMatchObject({ type: 'invalid_request_error', code });
    }
  });

  it('a request still arriving after REQUEST_TIMEOUT_MS answers 400 bad_request and its connection is closed', async () => {
    const slow = await startTestApp({ REQUEST_TIMEOUT_MS: '1000' });
    try {
      const { key: slowKey } = await slow.tenant();
      await slow.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = slow.app.server.address() as AddressInfo;
      // Headers and a tenth of the body, and nothing more: the rest never comes.
      const slowly = (key: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1', () =>
            socket.write(
              `POST /api/v1/apps HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"`,
            ),
          );
          let text = '';
          socket.on('data', (chunk) => {
            text += chunk;
          });
          socket.on('close', () => resolve(text));
          socket.on('error', reject);
        });
      const [answer, unknownKey] = await Promise.all([slowly(slowKey), slowly('not-a-key')]);
      // Refused at once (401) without its body; the connection is closed when its time is up.
      expect(unknownKey).toMatch(/^HTTP\/1.1 401 /);
      expect(unknownKey.match(/HTTP\/1.1/g)).toHaveLength(1);
      const [head, body] = answer.split('\r\n\r\n');
      expect(head).toMatch(/^HTTP\/1.1 400 /);
      expect(JSON.parse(body as string).error).toMatchObject({
        code: 'bad_request',
        message: 'The request did not arrive in time.',
      });
    } finally {
      await slow.close();
    }
  });

  it('an unknown route answers 404 not_found with the error body', async () => {
    expectError(await t.call({ url: '/api/v1/nothing-here', key }), 404, 'not_found');
  });

  it('router errors keep the error body: bad percent-encoding → 400, an over-long segment → 404', async () => {
    expectError(await t.call({ url: '/api/v1/apps/%E0%A4%A', key }), 400, 'bad_request');
    expectError(await t.call({ url: `/api/v1/apps/${'a'.repeat(300)}`, key }), 404, 'not_found');
  });

  it('a path id that is not a UUID answers 404 not_found', async () => {
    expectError(await t.call({ url: '/api/v1/workflows/not-a-uuid', key }), 404, 'not_found');
    expectError(
      await t.call({ url: '/api/v1/workflows/urn:uuid:00000000-0000-7000-8000-000000000000', key }),
      404,
      'not_found',
    );
  });
});

describe('validation (spec: Commit App Files bounds)', () => {
  it('a missing required field answers 422 missing_required_parameter naming it', async () => {
    expectError(await commit({ files: [file] }), 422, 'missing_required_parameter', 'message');
    expectError(await commit({ message: 'm' }), 422, 'missing_required_parameter', 'files');
    expectError(
      await commit({ message: 'm', files: [{ content: 'x' }] }),
      422,
      'missing_required_parameter',
      'files[0].path',
    );
  });

  it('message must be 1 to 500 characters', async () => {
    expectError(await commit({ message: '', files: [file] }), 422, 'validation_error', 'message');
    expectError(await commit({ message: 'x'.repeat(501), files: [file] }), 422, 'validation_error', 'message');
    expect((await commit({ message: 'x'.repeat(500), files: [file] })).status).toBe(200);
  });

  it('files must hold 1 to 200 items', async () => {
    expectError(await commit({ message: 'm', files: [] }), 422, 'validation_error', 'files');
    const many = Array.from({ length: 201 }, (_, i) => ({ path: `f${i}`, content: 'x' }));
    expectError(await commit({ message: 'm', files: many }), 422, 'validation_error', 'files');
    expect((await commit({ message: 'm', files: many.slice(0, 200) })).status).toBe(200);
  });

  it('a path is at most 200 characters, and content is a string or null', async () => {
    expectError(
      await commit({ message: 'm', files: [file, { path: 'p'.repeat(201), content: 'x' }] }),
      422,
      'validation_error',
      'files[1].path',
    );
    expectError(
      await commit({ message: 'm', files: [{ path: 'a', content: 5 }] }),
      422,
      'validation_error',
      'files[0].content',
    );
  });

  it('an unknown body field answers 422 validation_error naming it', async () => {
    expectError(await commit({ message: 'm', files: [file], force: true }), 422, 'validation_error', 'force');
    expectError(
      await commit({ message: 'm', files: [{ ...file, mode: '755' }] }),
      422,
      'validation_error',
      'files[0].mode',
    );
  });

  it('body values are not coerced: "true" is not a boolean', async () => {
    const wf = await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'coerce' } });
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: 'true' } }),
      422,
      'validation_error',
      'enabled',
    );
  });

  it('query parameters are validated: limit 1–100, cursors this API issued', async () => {
    expectError(await t.call({ url: '/api/v1/apps?limit=0', key }), 422, 'validation_error', 'limit');
    expectError(await t.call({ url: '/api/v1/apps?limit=101', key }), 422, 'validation_error', 'limit');
    expectError(await t.call({ url: '/api/v1/apps?cursor=bogus', key }), 422, 'validation_error', 'cursor');
  });

  it('paths with .. or empty segments are refused', async () => {
    expectError(
      await commit({ message: 'm', files: [{ path: '../etc/passwd', content: 'x' }] }),
      422,
      'validation_error',
      'files[0].path',
    );
    expectError(
      await commit({ message: 'm', files: [{ path: 'a//b', content: 'x' }] }),
      422,
      'validation_error',
      'files[0].path',
    );
    // C1 control characters are control characters too.
    expectError(
      await commit({ message: 'm', files: [{ path: 'ctl\u0085x', content: 'x' }] }),
      422,
      'validation_error',
      'files[0].path',
    );
  });

  it('text that is not valid Unicode (a lone surrogate, valid JSON) is refused where it is, never stored as U+FFFD', async () => {
    // Two paths that differ only in their lone surrogate would be one path in the database.
    const raw = '{"message":"m","files":[{"path":"x\\ud800","content":"1"},{"path":"x\\udc00","content":"2"}]}';
    const r = await postJson('/api/v1/apps/web/commits', raw);
    expectError(r, 422, 'validation_error');
    expect(['files[0].path', 'files[1].path']).toContain(r.body.error.param);
    const key_ = await postJson('/api/v1/apps', '{"name":"ok","\\udc00":1}');
    expectError(key_, 400, 'bad_request');
  });

  it('a NUL character or a number beyond a double is refused naming its field, never stored or turned to null', async () => {
    const nul = await postJson('/api/v1/tasks', '{"title":"a\\u0000b"}');
    expectError(nul, 422, 'validation_error', 'title');
    expect(nul.body.error.message).toBe('title holds a NUL character (\\u0000), which cannot be stored.');
    expectError(
      await postJson('/api/v1/apps/web/commits', '{"message":"m","files":[{"path":"a","content":"x\\u0000"}]}'),
      422,
      'validation_error',
      'files[0].content',
    );
    const huge = await postJson('/api/v1/tasks', '{"title":"t","description":1e400}');
    expectError(huge, 422, 'validation_error', 'description');
    expect(huge.body.error.message).toMatch(/too large to be read/);
  });
});

describe('pagination', () => {
  it('walks a list page by page with next_cursor until has_more is false', async () => {
    const { key: k } = await t.tenant(['apps:write']);
    for (let i = 0; i < 5; i++) await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: `p${i}` } });
    const seen: string[] = [];
    let url = '/api/v1/apps?limit=2';
    for (;;) {
      const page = await t.call({ url, key: k });
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.data.map((a: { name: string }) => a.name));
      if (!page.body.has_more) {
        expect(page.body.next_cursor).toBeNull();
        break;
      }
      url = `/api/v1/apps?limit=2&cursor=${page.body.next_cursor}`;
    }
    expect(seen).toEqual(['p4', 'p3', 'p2', 'p1', 'p0']);
  });
});

describe('request ids and logs', () => {
  it('every answer carries X-Request-Id, echoing a well-formed incoming one', async () => {
    const fresh = await t.call({ url: '/api/v1/apps', key });
    expect(fresh.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await t.call({ url: '/api/v1/apps', key, headers: { 'x-request-id': 'trace-123' } });
    expect(echoed.headers['x-request-id']).toBe('trace-123');
    const refused = await t.call({ url: '/api/v1/apps', key, headers: { 'x-request-id': 'bad id\u0001' } });
    expect(refused.headers['x-request-id']).not.toBe('bad id\u0001');
    expect((await t.call({ url: '/nowhere' })).headers['x-request-id']).toBeTruthy();
    // Refusals carry it too: no key (401), and a body that is not JSON (400).
    const unauthenticated = await t.call({ url: '/api/v1/apps', headers: { 'x-request-id': 'trace-401' } });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers['x-request-id']).toBe('trace-401');
    const malformed = await t.call({
      method: 'POST',
      url: '/api/v1/apps',
      key,
      headers: { 'content-type': 'application/json', 'x-request-id': 'trace-400' },
      body: '{not json',
    });
    expect(malformed.status).toBe(400);
    expect(malformed.headers['x-request-id']).toBe('trace-400');
  });
});

describe('secrets in logs', () => {
  it('a key sent in the query string is refused and not logged; the other parameters are', async () => {
    const lines: string[] = [];
    const logStream = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logged = await startTestApp({ LOG_LEVEL: 'info' }, { logStream });
    try {
      const { key: k } = await logged.tenant(['apps:read']);
      const r = await logged.call({ url: `/api/v1/apps?limit=5&api_key=${k}&access_token=${k}&cursor=abc` });
      expect(r.status).toBe(401);
      const text = lines.join('');
      expect(text).toContain('limit=5&api_key=[redacted]&access_token=[redacted]&cursor=abc');
      expect(text).not.toContain(k);
    } finally {
      await logged.close();
    }
  });
});

describe('unexpected failures', () => {
  it('answer 500 internal_error with an event_id that the log carries, and no stack trace', async () => {
    const lines: string[] = [];
    const logStream = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const broken = await startTestApp({ LOG_LEVEL: 'info' }, { logStream });
    try {
      const { key: k } = await broken.tenant(['workflows:read']);
      const { sql } = await import('kysely');
      await sql`drop table workflows`.execute(broken.database.db);
      const r = await broken.call({ url: '/api/v1/workflows', key: k });
      const error = expectError(r, 500, 'internal_error');
      expect(error.type).toBe('api_error');
      expect(error.event_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.text).not.toMatch(/at .*\.ts:\d+/);
      expect(r.text).not.toContain('workflows" does not exist');
      const logged = lines.find((line) => line.includes(error.event_id));
      expect(logged).toBeDefined();
      expect(JSON.parse(logged as string).level).toBe(50);
      // The line is the request's: it carries the id the answer carries.
      expect(JSON.parse(logged as string).reqId).toBe(r.headers['x-request-id']);
      expect(lines.join('')).not.toContain(k);
    } finally {
      await broken.close();
    }
  });
});

describe('limits', () => {
  it('a body over BODY_LIMIT_BYTES answers 413 request_too_large', async () => {
    const small = await startTestApp({ BODY_LIMIT_BYTES: '2048' });
    try {
      const { key: k } = await small.tenant(['apps:write']);
      await small.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: 'big' } });
      const r = await small.call({
        method: 'POST',
        url: '/api/v1/apps/big/commits',
        key: k,
        body: { message: 'm', files: [{ path: 'a', content: 'x'.repeat(4096) }] },
      });
      expectError(r, 413, 'request_too_large');
    } finally {
      await small.close();
    }
  });

  it('rate limit: RateLimit-* headers on every answer, then 429 rate_limit_exceeded with Retry-After', async () => {
    const limited = await startTestApp({ RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const { key: k } = await limited.tenant(['apps:read']);
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await limited.call({ url: '/api/v1/apps', key: k }));
      // tenant() itself used the control plane from the same address: count from the headers.
      const first = answers[0];
      expect(first?.headers['ratelimit-limit']).toBe('3');
      expect(Number(first?.headers['ratelimit-reset'])).toBeGreaterThan(0);
      const refused = answers.find((a) => a.status === 429);
      expect(refused).toBeDefined();
      const error = expectError(refused as never, 429, 'rate_limit_exceeded');
      expect(error.type).toBe('rate_limit_error');
      expect(String(refused?.headers['retry-after'])).toMatch(/^\d+$/);
      expect(refused?.headers['ratelimit-remaining']).toBe('0');
      // Health and docs stay reachable for probes.
      expect((await limited.call({ url: '/healthz' })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('rate limit: a path with no route counts and is refused like any other, with the same headers', async () => {
    const limited = await startTestApp({ RATE_LIMIT_PER_MINUTE: '2' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const answer = await limited.call({ url: '/api/v1/no-such-thing' });
        expect(answer.headers['ratelimit-limit']).toBe('2');
        statuses.push(answer.status);
      }
      expect(statuses).toEqual([404, 404, 429]);
      // Counted before its body is read: a malformed body changes nothing.
      const malformed = await limited.call({
        method: 'POST',
        url: '/api/v1/no-such-thing',
        body: '{"broken":',
        headers: { 'content-type': 'application/json' },
      });
      expectError(malformed, 429, 'rate_limit_exceeded');
      // One budget: the routes are refused too.
      expectError(await limited.call({ url: '/api/v1/apps' }), 429, 'rate_limit_exceeded');
    } finally {
      await limited.close();
    }
  });

  it.runIf(Boolean(process.env.TEST_REDIS_URL))('with Redis, instances share one rate-limit budget', async () => {
    const namespace = `shared-${Date.now()}:`;
    const one = await startTestApp({ RATE_LIMIT_PER_MINUTE: '6' }, { redisNamespace: namespace });
    const two = await startTestApp({ RATE_LIMIT_PER_MINUTE: '6' }, { redisNamespace: namespace });
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) {
        statuses.push((await one.call({ url: '/api/v1/apps' })).status);
        statuses.push((await two.call({ url: '/api/v1/apps' })).status);
      }
      // 8 requests against a shared budget of 6: the last two are refused; apart, none would be.
      expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    } finally {
      await one.close();
      await two.close();
    }
  });
});

describe('Idempotency-Key', () => {
  it('replays the first answer for a repeat with the same body, creating nothing more', async () => {
    const { key: k } = await t.tenant(['apps:write']);
    const headers = { 'idempotency-key': 'create-once' };
    const first = await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: 'once' }, headers });
    const again = await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: 'once' }, headers });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await t.call({ url: '/api/v1/apps', key: k })).body.data).toHaveLength(1);
    // The same fields in another order are the same request.
    const body = { name: 'ordered', description: 'Fields in one order, then the other.' };
    const ordered = { 'idempotency-key': 'order-free' };
    const one = await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body, headers: ordered });
    const other = await t.call({
      method: 'POST',
      url: '/api/v1/apps',
      key: k,
      body: { description: body.description, name: body.name },
      headers: ordered,
    });
    expect(one.status).toBe(201);
    expect(other.headers['idempotent-replayed']).toBe('true');
    expect(other.body).toEqual(one.body);
  });

  it('the same key with a different body answers 409 conflict', async () => {
    const { key: k } = await t.tenant(['apps:write']);
    const headers = { 'idempotency-key': 'k-1' };
    await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: 'a1' }, headers });
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: 'a2' }, headers }),
      409,
      'conflict',
      'Idempotency-Key',
    );
  });

  it('error answers are replayed too, and keys belong to one tenant', async () => {
    const a = await t.tenant(['apps:write']);
    const b = await t.tenant(['apps:write']);
    const headers = { 'idempotency-key': 'shared-key' };
    await t.call({ method: 'POST', url: '/api/v1/apps', key: a.key, body: { name: 'dup' } });
    const conflict = await t.call({ method: 'POST', url: '/api/v1/apps', key: a.key, body: { name: 'dup' }, headers });
    expectError(conflict, 409, 'conflict', 'name');
    const replay = await t.call({ method: 'POST', url: '/api/v1/apps', key: a.key, body: { name: 'dup' }, headers });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(conflict.body);
    const other = await t.call({ method: 'POST', url: '/api/v1/apps', key: b.key, body: { name: 'dup' }, headers });
    expect(other.status).toBe(201);
  });

  it('a body refused by its schema is not stored: the corrected request runs under the same key', async () => {
    const { key: k } = await t.tenant(['apps:write']);
    const headers = { 'idempotency-key': 'fix-and-retry' };
    const refused = await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: '' }, headers });
    expectError(refused, 422, 'validation_error', 'name');
    const fixed = await t.call({ method: 'POST', url: '/api/v1/apps', key: k, body: { name: 'fixed' }, headers });
    expect(fixed.status).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
  });

  it('a key over 255 characters answers 422 naming the header', async () => {
    expectError(
      await t.call({
        method: 'POST',
        url: '/api/v1/apps',
        key,
        body: { name: 'z' },
        headers: { 'idempotency-key': 'k'.repeat(256) },
      }),
      422,
      'validation_error',
      'Idempotency-Key',
    );
  });
});

describe('meta endpoints', () => {
  it('/healthz and /readyz answer without a key; /docs/errors lists every code with an anchor', async () => {
    expect((await t.call({ url: '/healthz' })).body).toEqual({ status: 'ok' });
    expect((await t.call({ url: '/readyz' })).body).toEqual({ status: 'ready' });
    const page = await t.call({ url: '/docs/errors' });
    expect(page.status).toBe(200);
    for (const code of ['not_authenticated', 'too_many_items', 'ambiguous_addressing', 'concurrency_limit_exceeded']) {
      expect(page.text).toContain(`id="${code}"`);
    }
  });
});
