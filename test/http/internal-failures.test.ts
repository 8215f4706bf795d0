// Internal failures of writes (spec: Errors, creation_failed / update_failed / deletion_failed): a
// create, update or delete that fails on the server, not because of the request, answers the
// code of its kind, with an event_id its log line carries, over REST and MCP alike. The failures
// are real: a trigger added here makes the database raise an error on the statement.
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unexpectedFailure, writeKind } from '../../src/operations/errors.js';
import { OPERATIONS } from '../../src/operations/index.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let base: string;
let key: string;
const lines: string[] = [];

beforeAll(async () => {
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  t = await startTestApp({ LOG_LEVEL: 'info' }, { logStream });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  ({ key } = await t.tenant());
  // Raises an error of no class the API maps to a client's error (P0001, raise_exception); the
  // other, the database's refusal of a duplicate (23505), which is the client's.
  await sql`create function refuse_statement() returns trigger language plpgsql as $$
    begin raise exception 'refused by the test trigger'; end $$`.execute(t.database.db);
  await sql`create function refuse_as_duplicate() returns trigger language plpgsql as $$
    begin raise exception 'a duplicate' using errcode = 'unique_violation'; end $$`.execute(t.database.db);
});
afterAll(() => t.close());

/** Makes the database refuse `event` statements on `table` (with `how`) while `run` runs. */
async function refusing<T>(
  table: string,
  event: 'insert' | 'update' | 'delete',
  run: () => Promise<T>,
  how: 'refuse_statement' | 'refuse_as_duplicate' = 'refuse_statement',
): Promise<T> {
  const trigger = sql.raw(`refuse_${event}_${table}`);
  const on = sql.table(table);
  await sql`create trigger ${trigger} before ${sql.raw(event)} on ${on}
    for each row execute function ${sql.raw(how)}()`.execute(t.database.db);
  try {
    return await run();
  } finally {
    await sql`drop trigger ${trigger} on ${on}`.execute(t.database.db);
  }
}

let nextId = 1;
/** A tool call over MCP: the spec error object of its tool error. */
async function toolError(name: string, args: Record<string, unknown>) {
  const response = await fetch(`${base}/api/v1/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-api-key': key },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } }),
  });
  expect(response.status).toBe(200);
  const { result } = (await response.json()) as { result: { isError?: boolean; content: { text: string }[] } };
  expect(result.isError, JSON.stringify(result)).toBe(true);
  return JSON.parse(result.content[0]?.text ?? '').error;
}

/** The error's event_id names one error line of the log, the request's. */
function expectLogged(eventId: unknown) {
  expect(eventId).toMatch(/^[0-9a-f-]{36}$/);
  const line = lines.find((each) => each.includes(String(eventId)));
  expect(line, `no log line for ${eventId}`).toBeDefined();
  expect(JSON.parse(line as string).level).toBe(50);
}

describe('a write that fails on the server', () => {
  it('a create answers 500 creation_failed, over REST and MCP, with an event_id in the log', async () => {
    await refusing('apps', 'insert', async () => {
      const rest = await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'never-made' } });
      const error = expectError(rest, 500, 'creation_failed');
      expect(error.type).toBe('api_error');
      expect(error.message).toMatch(/could not be created.*Retry/);
      expect(rest.text).not.toContain('refused by the test trigger');
      expectLogged(error.event_id);
      const mcp = await toolError('create_app', { name: 'never-made' });
      expect(mcp).toMatchObject({ type: 'api_error', code: 'creation_failed' });
      expect(mcp.doc_url).toMatch(/\/docs\/errors#creation_failed$/);
      expectLogged(mcp.event_id);
    });
    // Nothing was made, and once the database takes the statement again the same create works.
    expect((await t.call({ url: '/api/v1/apps/never-made', key })).status).toBe(404);
    expect((await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'never-made' } })).status).toBe(201);
  });

  it('an update answers 500 update_failed, over REST and MCP', async () => {
    const created = await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'to-enable' } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await refusing('workflows', 'update', async () => {
      const rest = await t.call({
        method: 'PUT',
        url: `/api/v1/workflows/${id}/enabled`,
        key,
        body: { enabled: true },
      });
      expectLogged(expectError(rest, 500, 'update_failed').event_id);
      const mcp = await toolError('set_workflow_enabled', { workflow_id: id, enabled: true });
      expect(mcp).toMatchObject({ type: 'api_error', code: 'update_failed' });
      expectLogged(mcp.event_id);
    });
    expect((await t.call({ url: `/api/v1/workflows/${id}`, key })).body.enabled).toBe(false);
  });

  it('a delete answers 500 deletion_failed, over REST and MCP', async () => {
    expect((await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'to-delete' } })).status).toBe(201);
    await refusing('apps', 'delete', async () => {
      const rest = await t.call({ method: 'DELETE', url: '/api/v1/apps/to-delete', key });
      expectLogged(expectError(rest, 500, 'deletion_failed').event_id);
      const mcp = await toolError('delete_app', { name: 'to-delete' });
      expect(mcp).toMatchObject({ type: 'api_error', code: 'deletion_failed' });
      expectLogged(mcp.event_id);
    });
    expect((await t.call({ url: '/api/v1/apps/to-delete', key })).status).toBe(200);
  });

  it("the client's errors stay theirs: a refusal the database makes for the request, 404 and 422 are not failures", async () => {
    await refusing(
      'apps',
      'insert',
      async () => {
        expectError(await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'dup' } }), 409, 'conflict');
        expect(await toolError('create_app', { name: 'dup' })).toMatchObject({ code: 'conflict' });
      },
      'refuse_as_duplicate',
    );
    await refusing('apps', 'insert', async () => {
      const missing = await t.call({ method: 'POST', url: '/api/v1/apps', key, body: {} });
      expectError(missing, 422, 'missing_required_parameter', 'name');
    });
    await refusing('apps', 'delete', async () => {
      expectError(await t.call({ method: 'DELETE', url: '/api/v1/apps/no-such-app', key }), 404, 'not_found');
      expect(await toolError('delete_app', { name: 'no-such-app' })).toMatchObject({ code: 'not_found' });
    });
  });
});

describe('the kind of a write', () => {
  const byId = new Map(OPERATIONS.map((op) => [op.id, op]));
  const kindOf = (id: string) => writeKind(byId.get(id) ?? (undefined as never));

  it('comes from the method, the success status and destructive, or the entry itself', () => {
    for (const id of ['createApp', 'createTask', 'upsertUser', 'addTaskComment']) expect(kindOf(id), id).toBe('create');
    for (const id of ['updateSource', 'setWorkflowEnabled', 'updateWebhookEndpoint'])
      expect(kindOf(id), id).toBe('update');
    for (const id of ['deleteApp', 'bulkDeleteDocuments', 'clearCustomDataSourceRows', 'purgeSmartSourceRows']) {
      expect(kindOf(id), id).toBe('delete');
    }
    // Reads, and POSTs that act rather than make, update or delete a resource.
    for (const id of ['listApps', 'getApp', 'getDashboardAnalytics', 'syncSource', 'replayWebhookDelivery']) {
      expect(kindOf(id), id).toBeUndefined();
    }
    // POSTs whose entry says what they write.
    expect(kindOf('commitAppFiles')).toBe('create');
    for (const id of ['addUserPermissions', 'rotateWebhookSecret', 'reviewKnowledgeUpdateRequest']) {
      expect(kindOf(id), id).toBe('update');
    }
    expect(writeKind({ method: 'POST', writes: 'update' })).toBe('update');
    expect(writeKind({ method: 'DELETE', writes: false })).toBeUndefined();
  });

  it('names the failure: a statement canceled for its time too, and internal_error for what is not a write', () => {
    expect(unexpectedFailure(byId.get('createApp'), true)).toEqual({
      code: 'creation_failed',
      message:
        'The resource could not be created: the request took too long and was canceled; it was logged. Retry the request.',
    });
    expect(unexpectedFailure(byId.get('deleteApp'), false).code).toBe('deletion_failed');
    expect(unexpectedFailure(byId.get('listApps'), true)).toEqual({
      code: 'internal_error',
      message: 'The request took too long and was canceled; it was logged.',
    });
    expect(unexpectedFailure(undefined, false).code).toBe('internal_error');
  });
});
