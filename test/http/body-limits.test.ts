// Bodies cost their sender, never the event loop: a path with no route is answered from its
// headers, each operation takes the body its job needs (bytes, values, depth) and refuses more
// before parsing, MCP tool calls meet their operation's limits, and a body left unread is drained
// up to a bound. Over a real listener where the transport matters.
import net from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINGER_BYTES } from '../../src/http/unread-body.js';
import { ADMIN_TOKEN, expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let port: number;
let key: string;
const logs: string[] = [];

beforeAll(async () => {
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      logs.push(String(chunk));
      done();
    },
  });
  t = await startTestApp({ LOG_LEVEL: 'info' }, { logStream });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  port = typeof address === 'object' && address ? address.port : 0;
  ({ key } = await t.tenant());
  const created = await t.call({
    method: 'POST',
    url: '/api/v1/custom-data-sources',
    key,
    body: { name: 'Orders', slug: 'orders' },
  });
  expect(created.status).toBe(201);
});
afterAll(() => t.close());

/** `{"<field>":[1,1,…]}` of `count` values. */
const flatArray = (field: string, count: number) => `{"${field}":[${'1,'.repeat(count - 1)}1]}`;
const json = { 'content-type': 'application/json' };

describe('a path with no route is answered from its headers', () => {
  it('its body is never parsed: invalid JSON to an unknown path or /healthz answers 404, not 400', async () => {
    for (const url of ['/nope', '/healthz', '/api/v1/no-such-thing']) {
      const answer = await t.call({ method: 'POST', url, headers: json, body: '{not json' });
      expectError(answer, 404, 'not_found');
    }
  });

  it('a 5 MB body of millions of values to an unknown path answers 404', async () => {
    const answer = await t.call({ method: 'POST', url: '/nope', headers: json, body: flatArray('a', 2_500_000) });
    expectError(answer, 404, 'not_found');
  });
});

describe('each operation takes the body its job needs', () => {
  const putRow = (body: string, apiKey = key) =>
    t.call({ method: 'PUT', url: '/api/v1/custom-data-sources/orders/rows/r1', key: apiKey, headers: json, body });

  it('a row over 1 MiB answers 413 request_too_large', async () => {
    const answer = await putRow(JSON.stringify({ data: { note: 'x'.repeat(1024 * 1024) } }));
    expectError(answer, 413, 'request_too_large');
  });

  it('a row of more than 10,000 values answers 413 naming the field, before it is parsed', async () => {
    expectError(await putRow(`{"data":${flatArray('a', 10_001)}}`), 413, 'request_too_large', 'data');
    // Not parsed: the same count, made invalid JSON at its end, is refused for its size all the same.
    expectError(await putRow(`{"data":${flatArray('a', 10_001)}`), 413, 'request_too_large', 'data');
    const fits = await putRow(`{"data":${flatArray('a', 9_000)}}`);
    expect(fits.status).toBe(201);
  });

  it('nesting past 64 levels answers 422 naming the top-level field', async () => {
    const deep = `${'['.repeat(70)}${']'.repeat(70)}`;
    expectError(await putRow(`{"data":{"a":${deep}}}`), 422, 'validation_error', 'data');
  });

  it('an unknown key is refused before its body is read, however large', async () => {
    expectError(await putRow(`{"data":${flatArray('a', 2_500_000)}}`, 'wsk_not_a_key'), 401, 'invalid_api_key');
  });

  it('operations that carry batches take up to BODY_LIMIT_BYTES: 100 rows of 20 KB', async () => {
    const rows = Array.from({ length: 100 }, (_, i) => ({ external_id: `b${i}`, data: { note: 'y'.repeat(20_000) } }));
    const answer = await t.call({
      method: 'POST',
      url: '/api/v1/custom-data-sources/orders/rows/batch',
      key,
      body: { rows },
    });
    expect(answer.status, answer.text.slice(0, 200)).toBe(200);
  });

  it('the control plane takes a few fields: 100 KB answers 413', async () => {
    const answer = await t.call({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      body: { tenant_id: 'big', name: 'x'.repeat(100_000) },
    });
    expectError(answer, 413, 'request_too_large');
  });
});

describe('MCP bodies and tool calls meet the same limits', () => {
  const rpc = (body: string) =>
    t.call({
      method: 'POST',
      url: '/api/v1/mcp',
      key,
      headers: { ...json, accept: 'application/json, text/event-stream' },
      body,
    });
  const call = (name: string, args: string) =>
    rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`);
  const toolError = (answer: { body: { result: { content: { text: string }[] } } }) =>
    JSON.parse(answer.body.result.content[0]?.text ?? '{}').error;

  it('5,000 nested brackets answer a JSON-RPC -32600, not a 500', async () => {
    const answer = await rpc('['.repeat(5000));
    expect(answer.status).toBe(400);
    expect(answer.body.error.code).toBe(-32600);
  });

  it('a body of more than 100,000 values answers 413 before it is parsed', async () => {
    expectError(await rpc(flatArray('a', 200_000)), 413, 'request_too_large', 'a');
  });

  it("a tool call's arguments over its operation's limit are the tool's request_too_large", async () => {
    const row = (values: number) => `{"id_or_slug":"orders","external_id":"m1","data":${flatArray('a', values)}}`;
    const answer = await call('upsert_custom_data_source_row', row(10_001));
    expect(answer.status).toBe(200);
    expect(answer.body.result.isError).toBe(true);
    expect(toolError(answer).code).toBe('request_too_large');
    const fits = await call('upsert_custom_data_source_row', row(5_000));
    expect(fits.body.result.isError, JSON.stringify(fits.body).slice(0, 300)).toBeUndefined();
  });
});

/** Sends raw bytes on a new connection and resolves with what came back once the server closes it. */
function rawExchange(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk;
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe('requests refused from their headers', () => {
  it('two Host headers answer 400 naming Host', async () => {
    const answer = await rawExchange(
      `GET /api/v1/apps HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nX-API-Key: ${key}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"param":"Host"');
  });
});

describe('a body left unread by its answer', () => {
  it('a body over the limit is read and thrown away after the 413: its client sends it all, then its next request', async () => {
    const size = 6 * 1024 * 1024;
    const answers = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let received = '';
      let rest = false;
      socket.on('data', (data) => {
        received += data;
        // The 413 came before the body was read: send the rest of it, then another request.
        if (!rest && received.includes('\r\n\r\n')) {
          rest = true;
          socket.write(Buffer.alloc(size - 64 * 1024, 0x20));
          socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
        }
      });
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
      socket.write(
        `PUT /api/v1/custom-data-sources/orders/rows/r9 HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`,
      );
      socket.write(Buffer.alloc(64 * 1024, 0x20));
    });
    expect(answers).toMatch(/^HTTP\/1\.1 413 /);
    expect(answers).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"status":"ok"/);
  });

  it('past LINGER_BYTES the connection is closed: an endless body is not read for ever', async () => {
    const outcome = await new Promise<{ answer: string; sent: number }>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      let answer = '';
      let sent = 0;
      const chunk = Buffer.alloc(256 * 1024, 0x20);
      socket.on('data', (data) => {
        answer += data;
      });
      socket.on('close', () => resolve({ answer, sent }));
      socket.on('error', () => undefined);
      socket.write(
        `POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const pump = () => {
        while (!socket.destroyed && sent < 20 * LINGER_BYTES) {
          sent += chunk.length;
          const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
          if (!socket.write(frame)) return void socket.once('drain', pump);
        }
      };
      pump();
    });
    expect(outcome.answer).toMatch(/^HTTP\/1\.1 404 /);
    expect(outcome.sent).toBeLessThan(20 * LINGER_BYTES);
  });
});

describe('a client that leaves mid-body', () => {
  it('is logged as a client abort, not as a database outage', async () => {
    logs.length = 0;
    await new Promise<void>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(
          `PUT /api/v1/custom-data-sources/orders/rows/r5 HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"data":{"a":"',
        );
        setTimeout(() => {
          socket.resetAndDestroy();
          resolve();
        }, 200);
      });
    });
    const deadline = Date.now() + 5_000;
    while (!logs.some((line) => line.includes('client closed')) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const text = logs.join('');
    expect(text).toContain('the client closed the connection before its body arrived');
    expect(text).not.toMatch(/database/i);
  });
});
