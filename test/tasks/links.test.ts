// Task links (spec: task link, behaviour rule 4; DESIGN.md §7, tasks): the five target kinds, made
// for real through the conversations and knowledge endpoints; targets must exist in the tenant;
// linking twice is a no-op, also when 20 requests race; `context` and `admin_url`; delete marks
// the link deleted and linking again revives it; no target in a simulated conversation; scopes and
// tenancy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

const ADMIN_BASE_URL = 'https://console.example.test/';

let t: TestApp;

interface Targets {
  conversation: string;
  message: string;
  ticket: string;
  feedback: string;
  knowledge_update_request: string;
  /** The conversation and message each target belongs to. */
  contexts: Record<string, { conversation_id: string | null; message_id: string | null }>;
}

/** Makes one target of each kind in a tenant, through the public API as a client would. */
async function makeTargets(key: string): Promise<Targets> {
  const post = async (url: string, body: unknown, status = 201) => {
    const r = await t.call({ method: 'POST', url, key, body });
    if (r.status !== status) throw new Error(`${url}: ${r.status} ${r.text}`);
    return r.body;
  };
  const billing = await post('/api/v1/agents', { name: 'Billing' });
  const front = await post('/api/v1/agents', { name: 'Front desk', handoff_agent_ids: [billing.id] });
  // No documents: the built-in agent does not know, and records a knowledge update request.
  const asked = await post('/api/v1/messages', { content: 'How do I export my invoices?', agent_id: front.id }, 200);
  const handedOff = await post(
    '/api/v1/messages',
    { conversation_id: asked.conversation_id, content: 'Please pass me to Billing' },
    200,
  );
  const ticket = handedOff.handoff?.ticket_id;
  if (!ticket) throw new Error(`no handoff: ${JSON.stringify(handedOff)}`);
  const feedback = await post(`/api/v1/messages/${asked.id}/feedback`, { rating: 'negative' });
  const gaps = await t.call({ url: '/api/v1/knowledge-update-requests', key });
  const gap = gaps.body.data.find((g: { conversation_id: string }) => g.conversation_id === asked.conversation_id);
  if (!gap) throw new Error(`no knowledge update request: ${gaps.text}`);
  const conversation = asked.conversation_id as string;
  return {
    conversation,
    message: asked.id,
    ticket,
    feedback: feedback.id,
    knowledge_update_request: gap.id,
    contexts: {
      conversation: { conversation_id: conversation, message_id: null },
      message: { conversation_id: conversation, message_id: asked.id },
      feedback: { conversation_id: conversation, message_id: asked.id },
      ticket: { conversation_id: conversation, message_id: handedOff.id },
      knowledge_update_request: { conversation_id: conversation, message_id: gap.message_id },
    },
  };
}

let key: string;
let tenantId: string;
let targets: Targets;
const link = (k: string, task: string, body: unknown) =>
  t.call({ method: 'POST', url: `/api/v1/tasks/${task}/links`, key: k, body });
const newTask = async (k: string) =>
  (await t.call({ method: 'POST', url: '/api/v1/tasks', key: k, body: { title: 'Look into this' } })).body as {
    id: string;
    identifier: string;
  };
const MISSING = '0190a0e0-0000-7000-8000-000000000000';
const KINDS = ['conversation', 'ticket', 'feedback', 'message', 'knowledge_update_request'] as const;
const ADMIN_PATHS: Record<(typeof KINDS)[number], string> = {
  conversation: 'conversations',
  ticket: 'tickets',
  feedback: 'feedback',
  message: 'messages',
  knowledge_update_request: 'knowledge-update-requests',
};

beforeAll(async () => {
  t = await startTestApp({ ADMIN_BASE_URL });
  ({ key, tenantId } = await t.tenant());
  targets = await makeTargets(key);
});
afterAll(() => t.close());

describe('linking', () => {
  it.each(KINDS)("links a %s (201) with the spec's record, its context and its admin_url", async (kind) => {
    const task = await newTask(key);
    const created = await link(key, task.identifier, { target_type: kind, target_id: targets[kind] });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(String),
      object: 'task_link',
      task_id: task.id,
      target_type: kind,
      target_id: targets[kind],
      context: targets.contexts[kind],
      deleted: false,
      admin_url: `https://console.example.test/${ADMIN_PATHS[kind]}/${targets[kind]}`,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const read = await t.call({ url: `/api/v1/tasks/${task.id}/links/${created.body.id}`, key });
    expect(read.body).toEqual(created.body);
  });

  it('linking the same target twice is a no-op: 200 with the existing link, nothing created', async () => {
    const task = await newTask(key);
    const body = { target_type: 'conversation', target_id: targets.conversation };
    const first = await link(key, task.id, body);
    const second = await link(key, task.identifier, body);
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    const list = await t.call({ url: `/api/v1/tasks/${task.id}/links`, key });
    expect(list.body.data).toEqual([first.body]);
  });

  it('20 identical link requests racing make one link: one 201 and nineteen 200s, all the same record', async () => {
    const task = await newTask(key);
    const body = { target_type: 'message', target_id: targets.message };
    const results = await Promise.all(Array.from({ length: 20 }, () => link(key, task.id, body)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(19);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    const list = await t.call({ url: `/api/v1/tasks/${task.id}/links`, key });
    expect(list.body.data).toHaveLength(1);
  });

  it('the same target on two tasks makes two links; two targets on one task make two links', async () => {
    const one = await newTask(key);
    const two = await newTask(key);
    const a = await link(key, one.id, { target_type: 'ticket', target_id: targets.ticket });
    const b = await link(key, two.id, { target_type: 'ticket', target_id: targets.ticket });
    const c = await link(key, one.id, { target_type: 'feedback', target_id: targets.feedback });
    expect([a.status, b.status, c.status]).toEqual([201, 201, 201]);
    const list = await t.call({ url: `/api/v1/tasks/${one.identifier}/links`, key });
    expect(list.body.data.map((l: { id: string }) => l.id)).toEqual([c.body.id, a.body.id]);
  });

  it('refuses a target_type outside the five kinds (422 validation_error, param target_type)', async () => {
    const task = await newTask(key);
    for (const target_type of ['article', 'Conversation', 'knowledge update request', '']) {
      expectError(
        await link(key, task.id, { target_type, target_id: targets.conversation }),
        422,
        'validation_error',
        'target_type',
      );
    }
    expectError(
      await link(key, task.id, { target_id: targets.conversation }),
      422,
      'missing_required_parameter',
      'target_type',
    );
  });

  it('refuses a target that does not exist, or is of another kind (422 invalid_parameters, param target_id)', async () => {
    const task = await newTask(key);
    expectError(
      await link(key, task.id, { target_type: 'conversation', target_id: MISSING }),
      422,
      'invalid_parameters',
      'target_id',
    );
    expectError(
      await link(key, task.id, { target_type: 'ticket', target_id: targets.conversation }),
      422,
      'invalid_parameters',
      'target_id',
    );
    expectError(
      await link(key, task.id, { target_type: 'message', target_id: 'abc' }),
      422,
      'validation_error',
      'target_id',
    );
    expectError(
      await link(key, task.id, { target_type: 'message', target_id: targets.message, note: 'x' }),
      422,
      'validation_error',
      'note',
    );
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/links`, key })).body.data).toEqual([]);
  });

  it('refuses a target of another tenant (422 invalid_parameters, param target_id)', async () => {
    const other = await t.tenant();
    const task = await newTask(other.key);
    for (const kind of KINDS) {
      expectError(
        await link(other.key, task.id, { target_type: kind, target_id: targets[kind] }),
        422,
        'invalid_parameters',
        'target_id',
      );
    }
  });
});

describe('simulated conversations', () => {
  it('a target in a conversation a simulation case is playing is no target: 422 invalid_parameters for each kind', async () => {
    const other = await t.tenant();
    const simulated = await makeTargets(other.key);
    // Marked as a run marks the conversation of a case it plays (src/domain/simulations/runs.ts);
    // it is deleted, with every target in it, when the case is recorded.
    await t.database.db
      .insertInto('simulation_conversations')
      .values({
        conversation_id: simulated.conversation,
        tenant_id: other.tenantId,
        run_id: MISSING,
        test_case_id: MISSING,
      })
      .execute();
    const task = await newTask(other.key);
    for (const kind of KINDS) {
      expectError(
        await link(other.key, task.id, { target_type: kind, target_id: simulated[kind] }),
        422,
        'invalid_parameters',
        'target_id',
      );
    }
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/links`, key: other.key })).body.data).toEqual([]);
  });
});

describe('deleting', () => {
  it('DELETE marks the link deleted: it answers and then reads deleted: true; deleting again changes nothing', async () => {
    const task = await newTask(key);
    const created = (await link(key, task.id, { target_type: 'conversation', target_id: targets.conversation })).body;
    const deleted = await t.call({
      method: 'DELETE',
      url: `/api/v1/tasks/${task.identifier}/links/${created.id}`,
      key,
    });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: created.id, deleted: true, target_id: targets.conversation });
    const read = await t.call({ url: `/api/v1/tasks/${task.id}/links/${created.id}`, key });
    expect(read.body).toEqual(deleted.body);
    const list = await t.call({ url: `/api/v1/tasks/${task.id}/links`, key });
    expect(list.body.data).toEqual([deleted.body]);
    const again = await t.call({ method: 'DELETE', url: `/api/v1/tasks/${task.id}/links/${created.id}`, key });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(deleted.body);
  });

  it('linking a deleted target again revives the same link (200, deleted: false)', async () => {
    const task = await newTask(key);
    const body = { target_type: 'knowledge_update_request', target_id: targets.knowledge_update_request };
    const created = (await link(key, task.id, body)).body;
    await t.call({ method: 'DELETE', url: `/api/v1/tasks/${task.id}/links/${created.id}`, key });
    const revived = await link(key, task.id, body);
    expect(revived.status).toBe(200);
    expect(revived.body).toMatchObject({ id: created.id, deleted: false, context: created.context });
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/links`, key })).body.data).toEqual([revived.body]);
  });

  it('answers 404 for a link that is not a UUID, does not exist, or belongs to another task', async () => {
    const one = await newTask(key);
    const two = await newTask(key);
    const created = (await link(key, one.id, { target_type: 'message', target_id: targets.message })).body;
    for (const url of [
      `/api/v1/tasks/${one.id}/links/nope`,
      `/api/v1/tasks/${one.id}/links/${MISSING}`,
      `/api/v1/tasks/${two.id}/links/${created.id}`,
      `/api/v1/tasks/TASK-999999/links/${created.id}`,
    ]) {
      expectError(await t.call({ url, key }), 404, 'not_found');
      expectError(await t.call({ method: 'DELETE', url, key }), 404, 'not_found');
    }
    expect((await t.call({ url: `/api/v1/tasks/${one.id}/links/${created.id}`, key })).body.deleted).toBe(false);
  });
});

describe('scopes and tenants', () => {
  it('link writes need tasks:write; a tasks:read key reads links and gets 403 insufficient_scope on writes', async () => {
    const task = await newTask(key);
    const created = (await link(key, task.id, { target_type: 'conversation', target_id: targets.conversation })).body;
    const reader = await t.key(tenantId, ['tasks:read']);
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/links`, key: reader })).status).toBe(200);
    expectError(
      await link(reader, task.id, { target_type: 'message', target_id: targets.message }),
      403,
      'insufficient_scope',
    );
    expectError(
      await t.call({ method: 'DELETE', url: `/api/v1/tasks/${task.id}/links/${created.id}`, key: reader }),
      403,
      'insufficient_scope',
    );
    expect((await t.call({ url: `/api/v1/tasks/${task.id}/links/${created.id}`, key })).body.deleted).toBe(false);
  });

  it("another tenant's key finds neither the task nor its links on any link route (404)", async () => {
    const other = await t.tenant();
    const task = await newTask(key);
    const created = (await link(key, task.id, { target_type: 'conversation', target_id: targets.conversation })).body;
    const base = `/api/v1/tasks/${task.id}/links`;
    expectError(await t.call({ url: base, key: other.key }), 404, 'not_found');
    expectError(await t.call({ url: `${base}/${created.id}`, key: other.key }), 404, 'not_found');
    expectError(await t.call({ method: 'DELETE', url: `${base}/${created.id}`, key: other.key }), 404, 'not_found');
    expectError(
      await link(other.key, task.id, { target_type: 'conversation', target_id: targets.conversation }),
      404,
      'not_found',
    );
    expect((await t.call({ url: `${base}/${created.id}`, key })).body.deleted).toBe(false);
  });
});

describe('admin_url', () => {
  it('ADMIN_BASE_URL is validated at start (http or https URL) and loses trailing slashes', () => {
    expect(loadConfig({ ADMIN_BASE_URL: 'https://console.example.test//' }).adminBaseUrl).toBe(
      'https://console.example.test',
    );
    expect(() => loadConfig({ ADMIN_BASE_URL: 'console.example.test' })).toThrow(ConfigError);
    expect(() => loadConfig({ ADMIN_BASE_URL: 'ftp://console.example.test' })).toThrow(/ADMIN_BASE_URL/);
  });

  it('defaults to https://admin.<BASE_DOMAIN> when ADMIN_BASE_URL is not set', async () => {
    const plain = await startTestApp({ BASE_DOMAIN: 'workspace.test' });
    try {
      const { key: k } = await plain.tenant();
      const conversation = (
        await plain
          .call({ method: 'POST', url: '/api/v1/agents', key: k, body: { name: 'Solo' } })
          .then(() => plain.call({ method: 'POST', url: '/api/v1/messages', key: k, body: { content: 'hello' } }))
      ).body.conversation_id;
      const task = (await plain.call({ method: 'POST', url: '/api/v1/tasks', key: k, body: { title: 'x' } })).body;
      const created = await plain.call({
        method: 'POST',
        url: `/api/v1/tasks/${task.id}/links`,
        key: k,
        body: { target_type: 'conversation', target_id: conversation },
      });
      expect(created.body.admin_url).toBe(`https://admin.workspace.test/conversations/${conversation}`);
    } finally {
      await plain.close();
    }
  });
});
