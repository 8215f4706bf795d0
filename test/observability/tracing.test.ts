// Tracing (docs/operations.md): with OTEL_EXPORTER_OTLP_ENDPOINT set, each request's spans reach
// the collector over OTLP/HTTP, nested under the request's server span (its operation or tool
// call; its statements too with TRACE_DATABASE_STATEMENTS), job runs are traces of their own with
// their statements, and the request's log line names its trace.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmbeddingsClient } from '../../src/domain/knowledge/embeddings/client.js';
import { currentTraceId, flushTracing, startTracing, stopTracing, withSpan } from '../../src/observability/tracing.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { embeddingsServer, MODEL } from '../support/embeddings-server.js';
import { decodeTraceExport } from '../support/otlp-proto.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: OtlpValue }[];
  status?: { code?: number; message?: string };
}
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: { key: string; value: OtlpValue }[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

/** OTLP span kinds (opentelemetry-proto): internal 1, server 2, client 3. */
const SERVER = 2;
const CLIENT = 3;

/**
 * A collector stand-in: takes OTLP/HTTP exports at POST /v1/traces, protobuf or JSON, and keeps
 * them (read as their JSON) with the content type each came as.
 */
async function startCollector() {
  const exports: OtlpExport[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      const protobuf = type === 'application/x-protobuf';
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !(protobuf || type === 'application/json')) {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      exports.push(
        protobuf ? (decodeTraceExport(body) as OtlpExport) : (JSON.parse(body.toString('utf8')) as OtlpExport),
      );
      contentTypes.push(type);
      // An empty ExportTraceServiceResponse, in either encoding.
      res.writeHead(200, { 'content-type': type }).end(protobuf ? '' : '{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    contentTypes,
    spans: () => exports.flatMap((e) => e.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue !== undefined ? Number(value.intValue) : value?.boolValue);
};

let collector: Awaited<ReturnType<typeof startCollector>>;
let t: TestApp;
let key: string;
const lines: string[] = [];

beforeAll(async () => {
  collector = await startCollector();
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collector.url;
  process.env.OTEL_SERVICE_NAME = 'workspace-api-under-test';
  expect(await startTracing()).toBe(true);
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  // After tracing started: the database and the app look once whether it is on.
  t = await startTestApp({ LOG_LEVEL: 'info' }, { logStream });
  ({ key } = await t.tenant());
});
afterAll(async () => {
  await t.close();
  await stopTracing();
  await collector.close();
  delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  delete process.env.OTEL_SERVICE_NAME;
});

/** The spans of the trace whose server span carries `requestId`, once exported. */
async function traceOf(requestId: string) {
  await flushTracing();
  const spans = collector.spans();
  const server = spans.find((span) => span.kind === SERVER && attribute(span, 'workspace.request_id') === requestId);
  if (!server) throw new Error(`no server span for ${requestId} among ${spans.length}`);
  return { server, spans: spans.filter((span) => span.traceId === server.traceId) };
}

/** One MCP tool call, as request `requestId`. */
const callTool = (requestId: string, name: string, args: Record<string, unknown> = {}) =>
  t.call({
    method: 'POST',
    url: '/api/v1/mcp',
    key,
    headers: { 'x-request-id': requestId, accept: 'application/json, text/event-stream' },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
  });

/** Whether `span` descends from `ancestor` within `spans`. */
function descends(span: OtlpSpan, ancestor: OtlpSpan, spans: OtlpSpan[]): boolean {
  let parent = span.parentSpanId;
  for (let hops = 0; parent && hops < 50; hops++) {
    if (parent === ancestor.spanId) return true;
    parent = spans.find((s) => s.spanId === parent)?.parentSpanId;
  }
  return false;
}

describe('tracing', () => {
  it("exports a request's server span and its operation span, nested by parent id; no statement spans", async () => {
    const requestId = `trace-${randomBytes(4).toString('hex')}`;
    const r = await t.call({ url: '/api/v1/apps', key, headers: { 'x-request-id': requestId } });
    expect(r.status).toBe(200);
    const { server, spans } = await traceOf(requestId);
    expect(server.name).toBe('GET /api/v1/apps');
    expect(server.parentSpanId ?? '').toBe('');
    expect(attribute(server, 'workspace.operation_id')).toBe('listApps');
    expect(attribute(server, 'http.route')).toBe('/api/v1/apps');
    expect(attribute(server, 'http.response.status_code')).toBe(200);
    const operation = spans.find((span) => span.name === 'operation listApps');
    expect(operation?.parentSpanId).toBe(server.spanId);
    expect(spans.filter((span) => span.name.startsWith('db '))).toEqual([]);
    const resource = collector.exports[0]?.resourceSpans[0]?.resource.attributes ?? [];
    expect(resource.find((a) => a.key === 'service.name')?.value.stringValue).toBe('workspace-api-under-test');
    // OTLP/HTTP's default encoding, with OTEL_EXPORTER_OTLP_PROTOCOL unset.
    expect(new Set(collector.contentTypes)).toEqual(new Set(['application/x-protobuf']));
  });

  it("the request's log line carries its trace id", async () => {
    const requestId = `trace-${randomBytes(4).toString('hex')}`;
    await t.call({ url: '/api/v1/apps', key, headers: { 'x-request-id': requestId } });
    const { server } = await traceOf(requestId);
    const line = lines.map((l) => JSON.parse(l)).find((e) => e.reqId === requestId && e.msg === 'request completed');
    expect(line).toMatchObject({ operation_id: 'listApps', status: 200, trace_id: server.traceId });
  });

  it("a caller's traceparent makes the request's span a child of the caller's", async () => {
    const requestId = `trace-${randomBytes(4).toString('hex')}`;
    const traceId = randomBytes(16).toString('hex');
    const parentId = randomBytes(8).toString('hex');
    await t.call({
      url: '/api/v1/apps',
      key,
      headers: { 'x-request-id': requestId, traceparent: `00-${traceId}-${parentId}-01` },
    });
    const { server } = await traceOf(requestId);
    expect(server.traceId).toBe(traceId);
    expect(server.parentSpanId).toBe(parentId);
  });

  it('a request whose caller left its trace out (traceparent flags 00) records no span, and its log line names no trace', async () => {
    const requestId = `trace-${randomBytes(4).toString('hex')}`;
    const traceId = randomBytes(16).toString('hex');
    const r = await t.call({
      url: '/api/v1/apps',
      key,
      headers: { 'x-request-id': requestId, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-00` },
    });
    expect(r.status).toBe(200);
    await flushTracing();
    expect(collector.spans().filter((span) => span.traceId === traceId)).toEqual([]);
    const line = lines.map((l) => JSON.parse(l)).find((e) => e.reqId === requestId && e.msg === 'request completed');
    expect(line).toMatchObject({ operation_id: 'listApps', status: 200 });
    expect(line).not.toHaveProperty('trace_id');
  });

  it("a request whose client goes away before its answer ends its span as failed; the connection's answered request does not", async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const answered = `trace-${randomBytes(4).toString('hex')}`;
    const abandoned = `trace-${randomBytes(4).toString('hex')}`;
    const head = (id: string, more: string) =>
      `Host: localhost\r\nX-API-Key: ${key}\r\nX-Request-Id: ${id}\r\n${more}\r\n`;
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () =>
        socket.write(`GET /api/v1/apps HTTP/1.1\r\n${head(answered, '')}`),
      );
      let received = '';
      socket.on('data', (chunk) => {
        received += chunk;
        if (!received.includes('\r\n\r\n')) return;
        // Answered: the same connection starts a task whose body never comes, then closes.
        received = '';
        socket.removeAllListeners('data');
        socket.write(
          `POST /api/v1/tasks HTTP/1.1\r\n${head(abandoned, 'Content-Type: application/json\r\nContent-Length: 100\r\n')}{"title":`,
        );
        setTimeout(() => socket.destroy(), 200);
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const gone = (await traceOf(abandoned)).server;
    expect(gone.name).toBe('POST /api/v1/tasks');
    expect(gone.status).toMatchObject({ code: 2, message: 'the client closed the connection' });
    expect(attribute(gone, 'workspace.operation_id')).toBe('createTask');
    const ok = (await traceOf(answered)).server;
    expect(attribute(ok, 'http.response.status_code')).toBe(200);
    expect(ok.status?.code ?? 0).toBe(0);
  });

  it("an MCP tool call is a span of its own under the request's server span", async () => {
    const requestId = `trace-${randomBytes(4).toString('hex')}`;
    const r = await callTool(requestId, 'list_apps');
    expect(r.status, r.text).toBe(200);
    const { server, spans } = await traceOf(requestId);
    const tool = spans.find((span) => span.name === 'tool listApps');
    expect(tool?.parentSpanId).toBe(server.spanId);
  });

  it("an agent turn's knowledge search, provider call and statements are spans under its operation's, over REST and MCP", async () => {
    await t.call({
      method: 'POST',
      url: '/api/v1/documents',
      key,
      body: { title: 'Refund policy', content: 'Refunds are paid back to your card within 14 days.' },
    });
    const rest = `trace-${randomBytes(4).toString('hex')}`;
    const sent = await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key,
      headers: { 'x-request-id': rest },
      body: { content: 'When are refunds paid back?' },
    });
    expect(sent.status, sent.text).toBe(200);
    const viaRest = await traceOf(rest);
    const operation = viaRest.spans.find((span) => span.name === 'operation sendMessage') as OtlpSpan;
    expect(operation.parentSpanId).toBe(viaRest.server.spanId);
    for (const name of ['knowledge.search', 'agent.provider_call']) {
      const step = viaRest.spans.find((span) => span.name === name);
      expect(step && descends(step, operation, viaRest.spans), name).toBe(true);
    }

    const mcp = `trace-${randomBytes(4).toString('hex')}`;
    const called = await callTool(mcp, 'send_message', { content: 'When are refunds paid back?' });
    expect(called.status, called.text).toBe(200);
    const viaMcp = await traceOf(mcp);
    const tool = viaMcp.spans.find((span) => span.name === 'tool sendMessage') as OtlpSpan;
    const search = viaMcp.spans.find((span) => span.name === 'knowledge.search');
    expect(search && descends(search, tool, viaMcp.spans)).toBe(true);
    // Its statements too, as a job run's, though TRACE_DATABASE_STATEMENTS is not set.
    const statements = viaRest.spans.filter((span) => span.name.startsWith('db '));
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.every((span) => descends(span, operation, viaRest.spans))).toBe(true);
  });

  it('a job run is a trace of its own, its statements under it', async () => {
    const { tenantId } = await t.tenant();
    const kind = `trace-probe-${randomBytes(3).toString('hex')}`;
    let traceId: string | undefined;
    t.jobs.register(kind, async () => {
      await withSpan('probe work', {}, async () => {
        traceId = currentTraceId();
        await t.database.db.selectFrom('jobs').select('id').where('kind', '=', kind).execute();
      });
    });
    await t.jobs.enqueue(t.database.db, { kind, tenantId });
    await t.jobs.runUntilIdle();
    await flushTracing();
    const spans = collector.spans();
    const job = spans.find((span) => span.name === `job ${kind}`);
    expect(job).toBeDefined();
    expect(job?.parentSpanId ?? '').toBe('');
    expect(attribute(job as OtlpSpan, 'workspace.tenant_id')).toBe(tenantId);
    const work = spans.find((span) => span.name === 'probe work' && span.traceId === job?.traceId);
    expect(work?.parentSpanId).toBe(job?.spanId);
    expect(traceId).toBe(job?.traceId);
    expect(spans.some((span) => span.name === 'db SELECT' && span.parentSpanId === work?.spanId)).toBe(true);
  });

  it("an embeddings call is a client span under the work that asked for it (a job's run here)", async () => {
    const server = await embeddingsServer();
    try {
      const client = createEmbeddingsClient({ baseUrl: server.url, model: MODEL, timeoutMs: 5_000 });
      const { tenantId } = await t.tenant();
      const kind = `trace-embed-${randomBytes(3).toString('hex')}`;
      t.jobs.register(kind, async () => {
        await client.embed(['a passage', 'another passage']);
      });
      await t.jobs.enqueue(t.database.db, { kind, tenantId });
      await t.jobs.runUntilIdle();
      await flushTracing();
      const spans = collector.spans();
      const job = spans.find((span) => span.name === `job ${kind}`) as OtlpSpan;
      const call = spans.find((span) => span.name === 'embeddings.call' && span.traceId === job.traceId) as OtlpSpan;
      expect(call.parentSpanId).toBe(job.spanId);
      expect(call.kind).toBe(CLIENT);
      expect(attribute(call, 'embeddings.model')).toBe(MODEL);
      expect(attribute(call, 'embeddings.inputs')).toBe(2);
    } finally {
      await server.close();
    }
  });

  // Exported as JSON here (OTEL_EXPORTER_OTLP_PROTOCOL=http/json), so the nesting is read from both encodings.
  describe('with TRACE_DATABASE_STATEMENTS, exporting JSON', () => {
    beforeAll(async () => {
      await stopTracing();
      collector.contentTypes.length = 0;
      const env = { ...process.env, TRACE_DATABASE_STATEMENTS: 'true', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
      expect(await startTracing(env)).toBe(true);
    });
    afterAll(() => {
      expect(new Set(collector.contentTypes)).toEqual(new Set(['application/json']));
    });

    it("exports each statement's span under the request's server span or its operation's", async () => {
      const requestId = `trace-${randomBytes(4).toString('hex')}`;
      const r = await t.call({ url: '/api/v1/apps', key, headers: { 'x-request-id': requestId } });
      expect(r.status).toBe(200);
      const { server, spans } = await traceOf(requestId);
      const operation = spans.find((span) => span.name === 'operation listApps');
      expect(operation?.parentSpanId).toBe(server.spanId);
      const statements = spans.filter((span) => span.name.startsWith('db '));
      expect(statements.length).toBeGreaterThan(0);
      // Every statement is the request's (the key's lookup before the handler, the handler's own).
      for (const statement of statements) {
        expect(descends(statement, server, spans), statement.name).toBe(true);
        expect(String(attribute(statement, 'db.query.text'))).not.toContain(key);
      }
      expect(statements.some((statement) => descends(statement, operation as OtlpSpan, spans))).toBe(true);
    });

    it("an MCP tool call's statements are under its span", async () => {
      const requestId = `trace-${randomBytes(4).toString('hex')}`;
      const r = await callTool(requestId, 'list_apps');
      expect(r.status, r.text).toBe(200);
      const { server, spans } = await traceOf(requestId);
      const tool = spans.find((span) => span.name === 'tool listApps');
      expect(tool?.parentSpanId).toBe(server.spanId);
      expect(spans.some((span) => span.name.startsWith('db ') && descends(span, tool as OtlpSpan, spans))).toBe(true);
    });
  });

  // Last: it stops tracing for the rest of the file.
  it('stopping (the server shutting down) sends the spans not yet sent', async () => {
    const requestId = `trace-${randomBytes(4).toString('hex')}`;
    await t.call({ url: '/api/v1/apps', key, headers: { 'x-request-id': requestId } });
    await stopTracing();
    const exported = collector
      .spans()
      .some((span) => span.kind === SERVER && attribute(span, 'workspace.request_id') === requestId);
    expect(exported).toBe(true);
    expect(currentTraceId()).toBeUndefined();
  });
});
