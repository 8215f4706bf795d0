// Tasks and comments (DESIGN.md §7, tasks; spec: task comment, behaviour rule 3): per-tenant
// gap-free TASK-<n> identifiers, both task addresses on every route, comments whose mentions
// must be staff users of the tenant and notify them, the comment author, scopes and tenancy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const createTask = (key: string, body: unknown) => t.call({ method: 'POST', url: '/api/v1/tasks', key, body });
const comment = (key: string, task: string, body: unknown) =>
  t.call({ method: 'POST', url: `/api/v1/tasks/${task}/comments`, key, body });
const createUser = async (key: string, email: string, name: string) =>
  (await t.call({ method: 'POST', url: '/api/v1/users', key, body: { email, name } })).body as {
    id: string;
    name: string;
    email: string;
  };
const notifications = (key: string, userId: string) => t.call({ url: `/api/v1/users/${userId}/notifications`, key });
const summary = (user: { id: string; name: string; email: string }) => ({
  id: user.id,
  name: user.name,
  email: user.email,
});
const MISSING = '0190a0e0-0000-7000-8000-000000000000';

describe('tasks', () => {
  it('creates a task (201) with identifier TASK-1, then TASK-2, readable by UUID and by identifier', async () => {
    const { key } = await t.tenant();
    const first = await createTask(key, { title: 'Refund policy is unclear', description: 'See chat' });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      object: 'task',
      identifier: 'TASK-1',
      title: 'Refund policy is unclear',
      description: 'See chat',
      assignee_id: null,
      assignee: null,
    });
    const second = await createTask(key, { title: 'Second' });
    expect(second.body.identifier).toBe('TASK-2');
    expect((await t.call({ url: `/api/v1/tasks/${first.body.id}`, key })).body).toEqual(first.body);
    expect((await t.call({ url: '/api/v1/tasks/TASK-1', key })).body).toEqual(first.body);
    expect((await t.call({ url: `/api/v1/tasks/${first.body.id.toUpperCase()}`, key })).body.id).toBe(first.body.id);
  });

  it('numbers tasks per tenant: another workspace starts at TASK-1', async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    await createTask(a.key, { title: 'a1' });
    await createTask(a.key, { title: 'a2' });
    expect((await createTask(b.key, { title: 'b1' })).body.identifier).toBe('TASK-1');
  });

  it('50 concurrent creations get exactly TASK-1..TASK-50, with no gap and no repeat', async () => {
    const { key } = await t.tenant();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => createTask(key, { title: `t${i}` })));
    expect(results.every((r) => r.status === 201)).toBe(true);
    const numbers = results.map((r) => Number(String(r.body.identifier).slice('TASK-'.length))).sort((x, y) => x - y);
    expect(numbers).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const listed = await t.call({ url: '/api/v1/tasks?limit=100', key });
    expect(listed.body.data).toHaveLength(50);
    expect(listed.body.data[0].identifier).toBe('TASK-50');
  });

  it('a refused creation uses no number: the sequence stays gap-free', async () => {
    const { key } = await t.tenant();
    await createTask(key, { title: 'one' });
    expectError(
      await createTask(key, { title: 'two', assignee_id: MISSING }),
      422,
      'invalid_parameters',
      'assignee_id',
    );
    expect((await createTask(key, { title: 'two' })).body.identifier).toBe('TASK-2');
  });

  it('takes an assignee among the staff users and shows them as a person summary', async () => {
    const { key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    const task = await createTask(key, { title: 'Assigned', assignee_id: ana.id });
    expect(task.status).toBe(201);
    expect(task.body).toMatchObject({ assignee_id: ana.id, assignee: summary(ana) });
  });

  it('validates the body: title required and bounded, no unknown fields, assignee_id a UUID', async () => {
    const { key } = await t.tenant();
    expectError(await createTask(key, {}), 422, 'missing_required_parameter', 'title');
    expectError(await createTask(key, { title: '' }), 422, 'validation_error', 'title');
    expectError(await createTask(key, { title: 'x'.repeat(501) }), 422, 'validation_error', 'title');
    expectError(await createTask(key, { title: 'x', status: 'open' }), 422, 'validation_error', 'status');
    expectError(await createTask(key, { title: 'x', assignee_id: 'ana' }), 422, 'validation_error', 'assignee_id');
    expect((await t.call({ url: '/api/v1/tasks', key })).body.data).toEqual([]);
  });

  it('answers 404 for a task id that is neither a UUID nor TASK-<n>, or that names no task', async () => {
    const { key } = await t.tenant();
    await createTask(key, { title: 'only' });
    for (const ref of ['task-1', 'TASK-0', 'TASK-01', 'TASK-1x', 'TASK-', '1', 'nope', 'TASK-2', MISSING]) {
      expectError(await t.call({ url: `/api/v1/tasks/${ref}`, key }), 404, 'not_found');
      expectError(await t.call({ url: `/api/v1/tasks/${ref}/comments`, key }), 404, 'not_found');
      expectError(await comment(key, ref, { content: 'x' }), 404, 'not_found');
    }
  });

  it('lists tasks newest first, a page at a time', async () => {
    const { key } = await t.tenant();
    for (const title of ['a', 'b', 'c']) await createTask(key, { title });
    const first = await t.call({ url: '/api/v1/tasks?limit=2', key });
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((x: { identifier: string }) => x.identifier)).toEqual(['TASK-3', 'TASK-2']);
    const rest = await t.call({ url: `/api/v1/tasks?limit=2&cursor=${first.body.next_cursor}`, key });
    expect(rest.body.data.map((x: { identifier: string }) => x.identifier)).toEqual(['TASK-1']);
    expect(rest.body).toMatchObject({ has_more: false, next_cursor: null });
  });
});

describe('comments', () => {
  it("answers 201 with the spec's record; the author defaults to the calling API key (id, name, email null)", async () => {
    const { tenantId, key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    const bo = await createUser(key, 'bo@example.com', 'Bo');
    const task = (await createTask(key, { title: 'Follow up' })).body;
    const created = await comment(key, 'TASK-1', { content: 'Please check', mention_ids: [ana.id, bo.id] });
    expect(created.status).toBe(201);
    const keys = await t.call({
      url: `/admin/v1/tenants/${tenantId}/api-keys`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const apiKey = keys.body.data[0];
    expect(created.body).toEqual({
      id: expect.any(String),
      object: 'task_comment',
      task_id: task.id,
      content: 'Please check',
      mentions: [summary(ana), summary(bo)],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      author: { id: apiKey.id, name: apiKey.name, email: null },
      edited_at: null,
    });
    const listed = await t.call({ url: `/api/v1/tasks/${task.id}/comments`, key });
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([created.body]);
  });

  it('notifies each mentioned staff user, listed newest first by GET /users/{id}/notifications', async () => {
    const { key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    const bo = await createUser(key, 'bo@example.com', 'Bo');
    await createTask(key, { title: 'Refunds' });
    const first = (await comment(key, 'TASK-1', { content: 'one', mention_ids: [ana.id], author_id: bo.id })).body;
    const second = (await comment(key, 'TASK-1', { content: 'two', mention_ids: [ana.id, bo.id] })).body;
    const anas = await notifications(key, ana.id);
    expect(anas.status).toBe(200);
    expect(anas.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(anas.body.data.map((n: { comment_id: string }) => n.comment_id)).toEqual([second.id, first.id]);
    expect(anas.body.data[1]).toMatchObject({
      object: 'notification',
      type: 'task_mention',
      user_id: ana.id,
      task_id: first.task_id,
      comment_id: first.id,
      message: 'Bo mentioned you on TASK-1: Refunds',
    });
    // Written by the API key: the key is the author the message names.
    expect(second.author.email).toBeNull();
    expect(anas.body.data[0].message).toBe(`${second.author.name} mentioned you on TASK-1: Refunds`);
    expect((await notifications(key, bo.id)).body.data.map((n: { comment_id: string }) => n.comment_id)).toEqual([
      second.id,
    ]);
  });

  it('the author is the staff user named by author_id; mentioning yourself does not notify you', async () => {
    const { key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    await createTask(key, { title: 'x' });
    const created = await comment(key, 'TASK-1', { content: 'note to self', mention_ids: [ana.id], author_id: ana.id });
    expect(created.status).toBe(201);
    expect(created.body.author).toEqual(summary(ana));
    expect(created.body.mentions).toEqual([summary(ana)]);
    expect((await notifications(key, ana.id)).body.data).toEqual([]);
  });

  it('a user mentioned twice in one comment is listed and notified once', async () => {
    const { key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    await createTask(key, { title: 'x' });
    const created = await comment(key, 'TASK-1', { content: 'hi', mention_ids: [ana.id, ana.id.toUpperCase()] });
    expect(created.body.mentions).toEqual([summary(ana)]);
    expect((await notifications(key, ana.id)).body.data).toHaveLength(1);
  });

  it('the service matches user ids without regard to case, as the database does: no comment kept behind a 422', async () => {
    const { tenantId, key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    const task = (await createTask(key, { title: 'x' })).body;
    const created = await t.services.tasks.addComment(
      tenantId,
      task.id,
      { content: 'upper', author_id: ana.id.toUpperCase(), mention_ids: [ana.id.toUpperCase()] },
      { keyId: MISSING, keyName: 'direct' },
    );
    expect(created.author).toEqual(summary(ana));
    expect(created.mentions).toEqual([summary(ana)]);
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/comments`, key })).body.data).toEqual([created]);
  });

  it('refuses a mention naming no staff user with 422 invalid_parameters, param mention_ids[i], and keeps nothing', async () => {
    const { key } = await t.tenant();
    const ana = await createUser(key, 'ana@example.com', 'Ana');
    const task = (await createTask(key, { title: 'x' })).body;
    expectError(
      await comment(key, task.id, { content: 'hi', mention_ids: [ana.id, MISSING] }),
      422,
      'invalid_parameters',
      'mention_ids[1]',
    );
    expectError(
      await comment(key, task.id, { content: 'hi', mention_ids: ['not-a-uuid'] }),
      422,
      'validation_error',
      'mention_ids[0]',
    );
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/comments`, key })).body.data).toEqual([]);
    expect((await notifications(key, ana.id)).body.data).toEqual([]);
  });

  it("refuses another tenant's user as a mention or as the author (422 invalid_parameters)", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const stranger = await createUser(b.key, 'stranger@example.com', 'Stranger');
    await createTask(a.key, { title: 'x' });
    expectError(
      await comment(a.key, 'TASK-1', { content: 'hi', mention_ids: [stranger.id] }),
      422,
      'invalid_parameters',
      'mention_ids[0]',
    );
    expectError(
      await comment(a.key, 'TASK-1', { content: 'hi', author_id: stranger.id }),
      422,
      'invalid_parameters',
      'author_id',
    );
    expect((await notifications(b.key, stranger.id)).body.data).toEqual([]);
  });

  it('validates the body: content required and not empty, no unknown fields', async () => {
    const { key } = await t.tenant();
    await createTask(key, { title: 'x' });
    expectError(await comment(key, 'TASK-1', {}), 422, 'missing_required_parameter', 'content');
    expectError(await comment(key, 'TASK-1', { content: '' }), 422, 'validation_error', 'content');
    expectError(await comment(key, 'TASK-1', { content: 'x', pinned: true }), 422, 'validation_error', 'pinned');
    expectError(
      await comment(key, 'TASK-1', { content: 'x', mention_ids: 'a' }),
      422,
      'validation_error',
      'mention_ids',
    );
  });

  it('lists comments newest first, a page at a time', async () => {
    const { key } = await t.tenant();
    await createTask(key, { title: 'x' });
    for (const content of ['c1', 'c2', 'c3']) await comment(key, 'TASK-1', { content });
    const first = await t.call({ url: '/api/v1/tasks/TASK-1/comments?limit=2', key });
    expect(first.body.data.map((c: { content: string }) => c.content)).toEqual(['c3', 'c2']);
    const rest = await t.call({ url: `/api/v1/tasks/TASK-1/comments?limit=2&cursor=${first.body.next_cursor}`, key });
    expect(rest.body.data.map((c: { content: string }) => c.content)).toEqual(['c1']);
  });
});

describe('scopes and tenants', () => {
  it('writes need tasks:write (a tasks:read key reads, and gets 403 insufficient_scope on writes)', async () => {
    const { tenantId, key } = await t.tenant();
    const task = (await createTask(key, { title: 'x' })).body;
    const reader = await t.key(tenantId, ['tasks:read']);
    expect((await t.call({ url: `/api/v1/tasks/${task.id}`, key: reader })).status).toBe(200);
    expect((await t.call({ url: '/api/v1/tasks/TASK-1/comments', key: reader })).status).toBe(200);
    expectError(await createTask(reader, { title: 'y' }), 403, 'insufficient_scope');
    expectError(await comment(reader, 'TASK-1', { content: 'y' }), 403, 'insufficient_scope');
    const stranger = await t.key(tenantId, ['accounts:write']);
    expectError(await t.call({ url: '/api/v1/tasks', key: stranger }), 403, 'insufficient_scope');
  });

  it("another tenant's key finds none of a tenant's tasks on any route (404), by UUID or by identifier", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const task = (await createTask(a.key, { title: 'private' })).body;
    await comment(a.key, task.id, { content: 'secret' });
    for (const ref of [task.id, 'TASK-1']) {
      expectError(await t.call({ url: `/api/v1/tasks/${ref}`, key: b.key }), 404, 'not_found');
      expectError(await t.call({ url: `/api/v1/tasks/${ref}/comments`, key: b.key }), 404, 'not_found');
      expectError(await comment(b.key, ref, { content: 'x' }), 404, 'not_found');
    }
    expect((await t.call({ url: '/api/v1/tasks', key: b.key })).body.data).toEqual([]);
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/comments`, key: a.key })).body.data).toHaveLength(1);
  });
});
