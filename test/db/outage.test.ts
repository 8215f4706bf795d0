// The database cannot be reached (src/db/errors.ts `isDatabaseUnreachable`, src/db/outage.ts):
// requests answer 503 service_unavailable in the error shape with Retry-After, MCP tools the same
// error, and the outage is logged once (a warning without a stack, then a line when the database
// answers again), not a stack per request or per poll of the job queue. On PGlite and PostgreSQL
// the app's statements fail on demand (a Kysely plugin throwing node-postgres's error); on
// PostgreSQL the app's connections also go through a TCP proxy of the test's own that cuts them.
import { Writable } from 'node:stream';
import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnreachable } from '../../src/db/errors.js';
import { cuttableProxy, expectError, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

type LogLine = Record<string, unknown> & { level: number; msg?: string };

/** The app's log lines, parsed. */
function capturedLog() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, stream };
}

const WARN = 40;
const isOutageWarning = (line: LogLine) => line.level === WARN && /database does not answer/.test(line.msg ?? '');
const isRecovery = (line: LogLine) => /database answers again/.test(line.msg ?? '');

async function until(condition: () => boolean, ms = 10_000): Promise<void> {
  for (const start = Date.now(); !condition(); ) {
    if (Date.now() - start > ms) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const listApps = { method: 'tools/call', params: { name: 'list_apps', arguments: {} } };
const mcpHeaders = { accept: 'application/json, text/event-stream' };

/** Asserts the outage's answers, then that it was logged once and without a stack. */
async function expectOutage(t: TestApp, key: string, log: LogLine[]) {
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      i % 2 === 0
        ? t.call({ url: '/api/v1/apps', key })
        : t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: `outage-${i}` } }),
    ),
  );
  for (const answer of answers) {
    const error = expectError(answer, 503, 'service_unavailable');
    expect(error.type).toBe('api_error');
    expect(error.event_id).toBeUndefined();
    expect(answer.headers['retry-after']).toBe('5');
  }
  // An MCP tool: the same error, as a tool error.
  const mcp = await t.call({
    method: 'POST',
    url: '/api/v1/mcp',
    key,
    headers: mcpHeaders,
    body: { jsonrpc: '2.0', id: 1, ...listApps },
  });
  expect(mcp.status).toBe(200);
  expect(mcp.body.result.isError).toBe(true);
  expect(JSON.parse(mcp.body.result.content[0].text).error).toMatchObject({
    type: 'api_error',
    code: 'service_unavailable',
  });
  // Readiness says so too.
  expect((await t.call({ url: '/readyz' })).status).toBe(503);
  // The job queue polled all along (JOB_POLL_MS 20), failing each time.
  await new Promise((resolve) => setTimeout(resolve, 200));

  expect(log.filter(isOutageWarning)).toHaveLength(1);
  const warned = log.find(isOutageWarning) as LogLine;
  expect(JSON.stringify(warned)).not.toContain('stack');
  expect(log.filter((line) => line.level >= 50)).toEqual([]);
  expect(log.filter((line) => /job poll failed|unexpected error|tool failed/.test(line.msg ?? ''))).toEqual([]);
  expect(log.some((line) => JSON.stringify(line).includes('"stack"'))).toBe(false);
}

async function expectRecovery(t: TestApp, key: string, log: LogLine[]) {
  await until(() => log.some(isRecovery));
  expect(log.filter(isRecovery)).toHaveLength(1);
  expect(log.find(isRecovery)?.failures).toBeGreaterThan(20);
  expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
  expect((await t.call({ url: '/readyz' })).status).toBe(200);
}

describe('isDatabaseUnreachable', () => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  it('knows connection errors, class 08 and the server refusing sessions, and nothing else', () => {
    for (const error of [
      withCode('ECONNREFUSED'),
      withCode('ECONNRESET'),
      withCode('ETIMEDOUT'),
      withCode('EPIPE'),
      new Error('Connection terminated unexpectedly'),
      new Error('Connection terminated'),
      new Error('Connection terminated due to connection timeout'),
      new Error('timeout exceeded when trying to connect'),
      new Error('Client has encountered a connection error and is not queryable'),
      withCode('08006'),
      withCode('08001'),
      withCode('57P01'),
      withCode('57P02'),
      withCode('57P03'),
      withCode('53300'),
      new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')]),
    ]) {
      expect(isDatabaseUnreachable(error), String((error as { code?: string }).code ?? error.message)).toBe(true);
    }
    for (const error of [withCode('23505'), withCode('57014'), withCode('22P02'), new Error('boom'), null, 'x']) {
      expect(isDatabaseUnreachable(error)).toBe(false);
    }
  });
});

describe('a database that cannot be reached (statements fail)', () => {
  let t: TestApp;
  let key: string;
  let cut = false;
  const log = capturedLog();
  // What node-postgres throws when the database refuses connections.
  const faults: KyselyPlugin = {
    transformQuery(args) {
      if (cut) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      return args.node;
    },
    transformResult: async (args) => args.result,
  };

  beforeAll(async () => {
    t = await startTestApp(
      { LOG_LEVEL: 'info', JOB_POLL_MS: '20' },
      { logStream: log.stream, wrapDb: (db) => db.withPlugin(faults), startJobs: true },
    );
    ({ key } = await t.tenant());
  });
  afterAll(() => t.close());

  it('answers 503 service_unavailable with Retry-After, logs the outage once, and answers again after', async () => {
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    cut = true;
    await expectOutage(t, key, log.lines);
    cut = false;
    await expectRecovery(t, key, log.lines);
  });
});

describe.runIf(usingPostgres)('a PostgreSQL whose connections are cut (TCP proxy)', () => {
  let t: TestApp;
  let key: string;
  let proxy: Awaited<ReturnType<typeof cuttableProxy>>;
  const log = capturedLog();

  beforeAll(async () => {
    proxy = await cuttableProxy(new URL(process.env.TEST_DATABASE_URL as string));
    t = await startTestApp(
      { LOG_LEVEL: 'info', JOB_POLL_MS: '20' },
      { logStream: log.stream, databaseUrl: proxy.url, startJobs: true },
    );
    ({ key } = await t.tenant());
  });
  afterAll(async () => {
    proxy.restore();
    await t.close();
    await proxy.close();
  });

  it('answers 503 service_unavailable with Retry-After, logs the outage once, and answers again after', async () => {
    expect((await t.call({ url: '/api/v1/apps', key })).status).toBe(200);
    proxy.cut();
    await expectOutage(t, key, log.lines);
    proxy.restore();
    await expectRecovery(t, key, log.lines);
  });
});
