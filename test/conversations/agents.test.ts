// Agents: create, list, get; handoff agents must be agents of the tenant; the default agent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const createAgent = (key: string, body: unknown) => t.call({ method: 'POST', url: '/api/v1/agents', key, body });

describe('agents', () => {
  it('creates an agent (201) with its instructions and handoff agents; the first one is the default', async () => {
    const { key } = await t.tenant();
    const billing = await createAgent(key, { name: 'Billing', instructions: 'Answer billing questions.' });
    expect(billing.status).toBe(201);
    expect(billing.body).toMatchObject({
      object: 'agent',
      name: 'Billing',
      instructions: 'Answer billing questions.',
      handoff_agent_ids: [],
      is_default: true,
    });
    const front = await createAgent(key, { name: 'Front desk', handoff_agent_ids: [billing.body.id] });
    expect(front.status).toBe(201);
    expect(front.body).toMatchObject({ handoff_agent_ids: [billing.body.id], is_default: false, instructions: null });

    const got = await t.call({ url: `/api/v1/agents/${front.body.id}`, key });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(front.body);
  });

  it('lists agents newest first in the list shape, paginated', async () => {
    const { key } = await t.tenant();
    for (const name of ['A', 'B', 'C']) await createAgent(key, { name });
    const first = await t.call({ url: '/api/v1/agents?limit=2', key });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((a: { name: string }) => a.name)).toEqual(['C', 'B']);
    const second = await t.call({ url: `/api/v1/agents?limit=2&cursor=${first.body.next_cursor}`, key });
    expect(second.body.data.map((a: { name: string }) => a.name)).toEqual(['A']);
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });
  });

  it('refuses a handoff agent id that is not an agent of the tenant (422 invalid_parameters, param handoff_agent_ids[i])', async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const known = await createAgent(key, { name: 'Known' });
    const foreign = await createAgent(other.key, { name: 'Foreign' });
    expectError(
      await createAgent(key, { name: 'X', handoff_agent_ids: [known.body.id, foreign.body.id] }),
      422,
      'invalid_parameters',
      'handoff_agent_ids[1]',
    );
    expectError(
      await createAgent(key, { name: 'X', handoff_agent_ids: ['not-a-uuid'] }),
      422,
      'validation_error',
      'handoff_agent_ids[0]',
    );
    const list = await t.call({ url: '/api/v1/agents', key });
    expect(list.body.data.map((a: { name: string }) => a.name)).toEqual(['Known']);
  });

  it('refuses a second agent with the same name (409 conflict, param name) and a missing name (422)', async () => {
    const { key } = await t.tenant();
    expect((await createAgent(key, { name: 'Solo' })).status).toBe(201);
    expectError(await createAgent(key, { name: 'Solo' }), 409, 'conflict', 'name');
    expectError(await createAgent(key, { instructions: 'x' }), 422, 'missing_required_parameter', 'name');
    expectError(await createAgent(key, { name: 'Y', color: 'red' }), 422, 'validation_error', 'color');
  });

  it('creates the default agent on demand when a tenant without agents sends a message', async () => {
    const { key } = await t.tenant();
    const sent = await t.call({ method: 'POST', url: '/api/v1/messages', key, body: { content: 'hello' } });
    expect(sent.status).toBe(200);
    const list = await t.call({ url: '/api/v1/agents', key });
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0]).toMatchObject({ name: 'Assistant', is_default: true });
    expect(sent.body.agent_id).toBe(list.body.data[0].id);
  });

  it("answers 404 for another tenant's agent and for an id that is not a UUID", async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const agent = await createAgent(key, { name: 'Mine' });
    expectError(await t.call({ url: `/api/v1/agents/${agent.body.id}`, key: other.key }), 404, 'not_found');
    expectError(await t.call({ url: '/api/v1/agents/nope', key }), 404, 'not_found');
  });

  it('needs agents:write to create and agents:read to read (403 insufficient_scope)', async () => {
    const { tenantId, key } = await t.tenant(['agents:read']);
    expectError(await createAgent(key, { name: 'Z' }), 403, 'insufficient_scope');
    expect((await t.call({ url: '/api/v1/agents', key })).status).toBe(200);
    const none = await t.key(tenantId, ['apps:read']);
    expectError(await t.call({ url: '/api/v1/agents', key: none }), 403, 'insufficient_scope');
  });
});
