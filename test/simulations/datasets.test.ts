// Simulations, the definitions: personas, datasets and test cases (their rules per expected type),
// import of a test case from a conversation with personal data redacted, every error with its
// status, code and param, scopes, and tenant isolation on every id-bearing route; a run or test
// case created while its dataset is deleted.
// Runs are proven in test/simulations/runs.test.ts.
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNKNOWN_ANSWER } from '../../src/domain/agent/builtin-provider.js';
import { redactText } from '../../src/domain/simulations/pii.js';
import { expectError, lockWaiters, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const post = (key: string, url: string, body?: unknown) => t.call({ method: 'POST', url, key, body });
const get = (key: string, url: string) => t.call({ url, key });
const del = (key: string, url: string) => t.call({ method: 'DELETE', url, key });
const MISSING = '0190a0a0-0000-7000-8000-000000000000';

async function agent(key: string, name: string, handoff: string[] = []) {
  const created = await post(key, '/api/v1/agents', { name, handoff_agent_ids: handoff });
  expect(created.status).toBe(201);
  return created.body as { id: string; name: string };
}

async function dataset(key: string, body: Record<string, unknown> = {}) {
  const created = await post(key, '/api/v1/simulation/datasets', { name: `ds-${Math.random()}`, ...body });
  expect(created.status).toBe(201);
  return created.body as { id: string; name: string };
}

describe('personas', () => {
  it('creates a persona (201) and lists it; a taken name is 409 conflict', async () => {
    const { key } = await t.tenant();
    const created = await post(key, '/api/v1/simulation/personas', {
      name: 'Impatient customer',
      description: 'Short messages, wants answers fast.',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'simulation_persona',
      name: 'Impatient customer',
      description: 'Short messages, wants answers fast.',
    });
    const list = await get(key, '/api/v1/simulation/personas');
    expect(list.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(list.body.data.map((p: { id: string }) => p.id)).toEqual([created.body.id]);
    expectError(
      await post(key, '/api/v1/simulation/personas', { name: 'Impatient customer', description: 'x' }),
      409,
      'conflict',
      'name',
    );
    expectError(
      await post(key, '/api/v1/simulation/personas', { name: 'No description' }),
      422,
      'missing_required_parameter',
      'description',
    );
  });
});

describe('datasets', () => {
  it("creates a dataset: 201 with the spec's fields, agent_name resolved and test_case_count 0", async () => {
    const { key } = await t.tenant();
    const front = await agent(key, 'Front desk');
    const created = await post(key, '/api/v1/simulation/datasets', {
      name: 'Checkout questions',
      description: 'What customers ask at checkout',
      agent_id: front.id,
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(String),
      name: 'Checkout questions',
      object: 'simulation_dataset',
      description: 'What customers ask at checkout',
      agent_id: front.id,
      agent_name: 'Front desk',
      default_persona_id: null,
      test_case_count: 0,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: expect.any(String),
    });
    const got = await get(key, `/api/v1/simulation/datasets/${created.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created.body);
  });

  it('agent_id must name an agent of the tenant: otherwise 422 invalid_parameters, param agent_id', async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const foreign = await agent(other.key, 'Theirs');
    for (const agentId of [MISSING, foreign.id]) {
      expectError(
        await post(key, '/api/v1/simulation/datasets', { name: 'x', agent_id: agentId }),
        422,
        'invalid_parameters',
        'agent_id',
      );
    }
    expectError(
      await post(key, '/api/v1/simulation/datasets', { name: 'x', default_persona_id: MISSING }),
      422,
      'invalid_parameters',
      'default_persona_id',
    );
    expect((await get(key, '/api/v1/simulation/datasets')).body.data).toEqual([]);
  });

  it('refuses bad bodies: missing name, unknown field, wrong type, taken name', async () => {
    const { key } = await t.tenant();
    expectError(
      await post(key, '/api/v1/simulation/datasets', { description: 'x' }),
      422,
      'missing_required_parameter',
      'name',
    );
    expectError(
      await post(key, '/api/v1/simulation/datasets', { name: 'x', colour: 'red' }),
      422,
      'validation_error',
      'colour',
    );
    expectError(await post(key, '/api/v1/simulation/datasets', { name: 42 }), 422, 'validation_error', 'name');
    expectError(
      await post(key, '/api/v1/simulation/datasets', { name: 'x', agent_id: 'not-a-uuid' }),
      422,
      'validation_error',
      'agent_id',
    );
    await dataset(key, { name: 'Same' });
    expectError(await post(key, '/api/v1/simulation/datasets', { name: 'Same' }), 409, 'conflict', 'name');
  });

  it('lists datasets newest first with cursor pagination and live test case counts', async () => {
    const { key } = await t.tenant();
    const a = await dataset(key, { name: 'a' });
    const b = await dataset(key, { name: 'b' });
    const c = await dataset(key, { name: 'c' });
    await post(key, `/api/v1/simulation/datasets/${b.id}/test-cases`, { question: 'q', expected_type: 'no_answer' });
    const first = await get(key, '/api/v1/simulation/datasets?limit=2');
    expect(first.body.data.map((d: { id: string }) => d.id)).toEqual([c.id, b.id]);
    expect(first.body.data[1].test_case_count).toBe(1);
    expect(first.body.has_more).toBe(true);
    const second = await get(key, `/api/v1/simulation/datasets?limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body.data.map((d: { id: string }) => d.id)).toEqual([a.id]);
    expect(second.body.has_more).toBe(false);
  });

  it('a test case created while its dataset is deleted answers 201 or 404, never a 422 about a missing reference', async () => {
    const { key } = await t.tenant();
    const statuses: number[] = [];
    for (let round = 0; round < 3; round++) {
      const ds = await dataset(key);
      const url = `/api/v1/simulation/datasets/${ds.id}/test-cases`;
      const answers = await Promise.all([
        ...Array.from({ length: 10 }, () => post(key, url, { question: 'q', expected_type: 'no_answer' })),
        del(key, `/api/v1/simulation/datasets/${ds.id}`),
      ]);
      statuses.push(...answers.map((answer) => answer.status));
    }
    expect(statuses.filter((status) => status !== 201 && status !== 200 && status !== 404)).toEqual([]);
  });

  it('delete answers the deleted acknowledgement; the dataset, its test cases and runs then answer 404', async () => {
    const { key } = await t.tenant();
    const ds = await dataset(key);
    const tc = await post(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`, {
      question: 'Anything?',
      expected_type: 'no_answer',
    });
    const run = await post(key, `/api/v1/simulation/datasets/${ds.id}/runs`, {});
    expect(run.status).toBe(201);
    await t.jobs.runUntilIdle();
    expect((await get(key, `/api/v1/simulation/runs/${run.body.id}`)).body.status).toBe('completed');

    const deleted = await del(key, `/api/v1/simulation/datasets/${ds.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: ds.id, object: 'deleted', deleted: true });
    expectError(await get(key, `/api/v1/simulation/datasets/${ds.id}`), 404, 'not_found');
    expectError(await get(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`), 404, 'not_found');
    expectError(await del(key, `/api/v1/simulation/datasets/${ds.id}/test-cases/${tc.body.id}`), 404, 'not_found');
    expectError(await get(key, `/api/v1/simulation/datasets/${ds.id}/runs`), 404, 'not_found');
    expectError(await get(key, `/api/v1/simulation/runs/${run.body.id}`), 404, 'not_found');
    expectError(await get(key, `/api/v1/simulation/runs/${run.body.id}/results`), 404, 'not_found');
    expectError(await del(key, `/api/v1/simulation/datasets/${ds.id}`), 404, 'not_found');
    const rows = await t.database.db
      .selectFrom('simulation_results')
      .select('id')
      .where('run_id', '=', run.body.id)
      .execute();
    expect(rows).toEqual([]);
    expect((await get(key, '/api/v1/simulation/datasets')).body.data).toEqual([]);
  });

  it('deleting a dataset mid-run also deletes the conversations its run is playing', async () => {
    const { tenantId, key } = await t.tenant();
    const ds = await dataset(key);
    await post(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`, { question: 'q', expected_type: 'no_answer' });
    const run = await post(key, `/api/v1/simulation/datasets/${ds.id}/runs`, {});
    // A conversation the run is playing right now (marked as simulated, no verdict yet).
    const playing = await post(key, '/api/v1/messages', { content: 'in play' });
    await t.database.db
      .insertInto('simulation_conversations')
      .values({
        conversation_id: playing.body.conversation_id,
        tenant_id: tenantId,
        run_id: run.body.id,
        test_case_id: MISSING,
      })
      .execute();
    const own = await post(key, '/api/v1/messages', { content: 'a real customer' });
    expect((await del(key, `/api/v1/simulation/datasets/${ds.id}`)).status).toBe(200);
    expectError(await get(key, `/api/v1/conversations/${playing.body.conversation_id}`), 404, 'not_found');
    expect((await get(key, `/api/v1/conversations/${own.body.conversation_id}`)).status).toBe(200);
    // The run's job finds nothing left to play.
    await t.jobs.runUntilIdle();
  });
});

// PostgreSQL only: second sessions hold the delete, or the create, where the two cross. On PGlite
// transactions never interleave.
describe('creating while the dataset is deleted', () => {
  const blockedByMe = sql`pg_backend_pid() = any(pg_blocking_pids(pid))`;

  it.runIf(usingPostgres)(
    'a run requested as the dataset is deleted answers 404 naming dataset_id, not 409 "no test cases"',
    async () => {
      const { key } = await t.tenant();
      const ds = await dataset(key);
      await post(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`, { question: 'q', expected_type: 'no_answer' });
      await t.database.db.connection().execute(async (deleting) => {
        // The dataset is deleted but not committed: the request finds it, then waits for its row.
        await sql`begin`.execute(deleting);
        await sql`delete from simulation_datasets where id = ${ds.id}`.execute(deleting);
        const requested = post(key, `/api/v1/simulation/datasets/${ds.id}/runs`, {});
        expect(await lockWaiters(deleting, blockedByMe)).toBe(1);
        await sql`commit`.execute(deleting);
        const error = expectError(await requested, 404, 'not_found', 'dataset_id');
        expect(error.message).toContain(ds.id);
      });
      const runs = await t.database.db
        .selectFrom('simulation_runs')
        .select('id')
        .where('dataset_id', '=', ds.id)
        .execute();
      expect(runs).toEqual([]);
    },
  );

  it.runIf(usingPostgres)(
    'a run committed just before the dataset is deleted answers 201 with that run, not 404 naming an id never sent',
    async () => {
      const { key } = await t.tenant();
      const ds = await dataset(key);
      await post(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`, { question: 'q', expected_type: 'no_answer' });
      const db = t.database.db;
      let runId = '';
      await db.connection().execute((pause) =>
        db.connection().execute(async (deleting) => {
          // The run's transaction has written the run and waits to enqueue its job.
          await sql`begin`.execute(pause);
          await sql`lock table jobs in access exclusive mode`.execute(pause);
          const requested = post(key, `/api/v1/simulation/datasets/${ds.id}/runs`, {});
          expect(await lockWaiters(pause, sql`relation = 'jobs'::regclass`)).toBe(1);
          // The delete takes the runs as soon as that transaction commits, before anything reads them.
          await sql`begin`.execute(deleting);
          const taken = sql`lock table simulation_runs in access exclusive mode`.execute(deleting);
          expect(await lockWaiters(pause, sql`relation = 'simulation_runs'::regclass`)).toBe(1);
          await sql`commit`.execute(pause);
          await taken;
          await sql`delete from simulation_datasets where id = ${ds.id}`.execute(deleting);
          await sql`commit`.execute(deleting);
          const created = await requested;
          expect(created.status).toBe(201);
          expect(created.body).toMatchObject({
            object: 'simulation_run',
            status: 'queued',
            dataset_id: ds.id,
            dataset_name: ds.name,
            total_tests: 1,
          });
          runId = created.body.id;
        }),
      );
      expectError(await get(key, `/api/v1/simulation/runs/${runId}`), 404, 'not_found', 'run_id');
      // Its job finds the run gone and ends.
      await t.jobs.runUntilIdle();
    },
  );

  it.runIf(usingPostgres)(
    'a test case committed just before the dataset is deleted answers 201 with that case, not 404 naming an id never sent',
    async () => {
      const { key } = await t.tenant();
      const ds = await dataset(key);
      const persona = await post(key, '/api/v1/simulation/personas', { name: 'Hurried', description: 'Short.' });
      const db = t.database.db;
      await db.connection().execute((pause) =>
        db.connection().execute(async (deleting) => {
          // The case's transaction has written the case and waits to check its persona.
          await sql`begin`.execute(pause);
          await sql`select 1 from simulation_personas where id = ${persona.body.id} for update`.execute(pause);
          const requested = post(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`, {
            question: 'Anyone there?',
            expected_type: 'no_answer',
            persona_id: persona.body.id,
          });
          expect(await lockWaiters(pause, blockedByMe)).toBe(1);
          // The delete takes the cases as soon as that transaction commits, before anything reads them.
          await sql`begin`.execute(deleting);
          const taken = sql`lock table simulation_test_cases in access exclusive mode`.execute(deleting);
          expect(await lockWaiters(pause, sql`relation = 'simulation_test_cases'::regclass`)).toBe(1);
          await sql`commit`.execute(pause);
          await taken;
          await sql`delete from simulation_datasets where id = ${ds.id}`.execute(deleting);
          await sql`commit`.execute(deleting);
          const created = await requested;
          expect(created.status).toBe(201);
          expect(created.body).toMatchObject({
            object: 'simulation_test_case',
            dataset_id: ds.id,
            question: 'Anyone there?',
            persona_id: persona.body.id,
            persona_name: 'Hurried',
            order: 1,
          });
        }),
      );
      expectError(await get(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`), 404, 'not_found', 'dataset_id');
    },
  );
});

describe('test cases', () => {
  it("creates test cases of every expected type with the spec's fields, listed in order", async () => {
    const { key } = await t.tenant();
    const billing = await agent(key, 'Billing');
    const persona = await post(key, '/api/v1/simulation/personas', { name: 'Newcomer', description: 'First visit' });
    const ds = await dataset(key, { default_persona_id: persona.body.id });
    const url = `/api/v1/simulation/datasets/${ds.id}/test-cases`;

    const answer = await post(key, url, {
      question: 'How long do refunds take?',
      expected_type: 'answer',
      expected_answer: 'Refunds take 14 days.',
      metadata: { source: 'faq' },
    });
    expect(answer.status).toBe(201);
    expect(answer.body).toEqual({
      id: expect.any(String),
      object: 'simulation_test_case',
      dataset_id: ds.id,
      question: 'How long do refunds take?',
      expected_type: 'answer',
      expected_answer: 'Refunds take 14 days.',
      expected_tool_name: null,
      expected_tool_args: {},
      expected_agent_id: null,
      expected_agent_name: null,
      persona_id: persona.body.id,
      persona_name: 'Newcomer',
      metadata: { source: 'faq' },
      api_data_overrides: {},
      tool_call_overrides: {},
      order: 1,
      steps: [],
      created_at: expect.any(String),
    });
    const tool = await post(key, url, {
      question: 'cancel_order order_id=42',
      expected_type: 'tool_call',
      expected_tool_name: 'cancel_order',
      expected_tool_args: { order_id: '42' },
      tool_call_overrides: { cancel_order: { cancelled: true } },
      api_data_overrides: { lookup: { plan: 'pro' } },
      steps: [{ content: 'Thanks' }],
    });
    expect(tool.body).toMatchObject({
      order: 2,
      expected_tool_args: { order_id: '42' },
      tool_call_overrides: { cancel_order: { cancelled: true } },
      api_data_overrides: { lookup: { plan: 'pro' } },
      steps: [{ content: 'Thanks' }],
    });
    const handoff = await post(key, url, {
      question: 'Billing please',
      expected_type: 'handoff',
      expected_agent_id: billing.id,
      order: 0,
    });
    expect(handoff.body).toMatchObject({ expected_agent_id: billing.id, expected_agent_name: 'Billing', order: 0 });
    const none = await post(key, url, { question: 'Meaning of life?', expected_type: 'no_answer' });
    expect(none.body.order).toBe(3);

    const list = await get(key, `${url}?limit=3`);
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([handoff.body.id, answer.body.id, tool.body.id]);
    expect(list.body.has_more).toBe(true);
    const rest = await get(key, `${url}?limit=3&cursor=${list.body.next_cursor}`);
    expect(rest.body.data.map((c: { id: string }) => c.id)).toEqual([none.body.id]);
    expect(rest.body.has_more).toBe(false);
    expect((await get(key, `/api/v1/simulation/datasets/${ds.id}`)).body.test_case_count).toBe(4);
  });

  it('each expected type requires its fields: 422 missing_required_parameter naming the field', async () => {
    const { key } = await t.tenant();
    const ds = await dataset(key);
    const url = `/api/v1/simulation/datasets/${ds.id}/test-cases`;
    expectError(
      await post(key, url, { question: 'q', expected_type: 'answer' }),
      422,
      'missing_required_parameter',
      'expected_answer',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'answer', expected_answer: '   ' }),
      422,
      'missing_required_parameter',
      'expected_answer',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'tool_call' }),
      422,
      'missing_required_parameter',
      'expected_tool_name',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'handoff' }),
      422,
      'missing_required_parameter',
      'expected_agent_id',
    );
    expectError(await post(key, url, { expected_type: 'no_answer' }), 422, 'missing_required_parameter', 'question');
    expect((await get(key, url)).body.data).toEqual([]);
  });

  it('refuses unknown references and bad values with their param', async () => {
    const { key } = await t.tenant();
    const ds = await dataset(key);
    const url = `/api/v1/simulation/datasets/${ds.id}/test-cases`;
    expectError(
      await post(key, url, { question: 'q', expected_type: 'handoff', expected_agent_id: MISSING }),
      422,
      'invalid_parameters',
      'expected_agent_id',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'no_answer', persona_id: MISSING }),
      422,
      'invalid_parameters',
      'persona_id',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'guess' }),
      422,
      'validation_error',
      'expected_type',
    );
    expectError(
      await post(key, url, {
        question: 'q',
        expected_type: 'no_answer',
        tool_call_overrides: { transfer_to_agent: {} },
      }),
      422,
      'validation_error',
      'tool_call_overrides.transfer_to_agent',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'no_answer', steps: [{ content: '' }] }),
      422,
      'validation_error',
      'steps[0].content',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'no_answer', steps: ['text'] }),
      422,
      'validation_error',
      'steps[0]',
    );
    expectError(
      await post(key, url, { question: 'q', expected_type: 'no_answer', order: -1 }),
      422,
      'validation_error',
      'order',
    );
    expectError(
      await post(key, `/api/v1/simulation/datasets/${MISSING}/test-cases`, {
        question: 'q',
        expected_type: 'no_answer',
      }),
      404,
      'not_found',
    );
    expect((await get(key, url)).body.data).toEqual([]);
  });

  it('delete answers the deleted acknowledgement; the case leaves the list; again is 404', async () => {
    const { key } = await t.tenant();
    const ds = await dataset(key);
    const url = `/api/v1/simulation/datasets/${ds.id}/test-cases`;
    const a = await post(key, url, { question: 'a', expected_type: 'no_answer' });
    const b = await post(key, url, { question: 'b', expected_type: 'no_answer' });
    const deleted = await del(key, `${url}/${a.body.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: a.body.id, object: 'deleted', deleted: true });
    expect((await get(key, url)).body.data.map((c: { id: string }) => c.id)).toEqual([b.body.id]);
    expect((await get(key, `/api/v1/simulation/datasets/${ds.id}`)).body.test_case_count).toBe(1);
    expectError(await del(key, `${url}/${a.body.id}`), 404, 'not_found');
    // A case of another dataset is not found through this one.
    const other = await dataset(key);
    expectError(await del(key, `/api/v1/simulation/datasets/${other.id}/test-cases/${b.body.id}`), 404, 'not_found');
  });
});

describe('import from a conversation', () => {
  const send = (key: string, body: unknown) => post(key, '/api/v1/messages', body);

  it('builds an answer case: first question, final answer, later messages as steps, PII redacted by default', async () => {
    const { key } = await t.tenant();
    await post(key, '/api/v1/documents', {
      title: 'Refund policy',
      content: 'Refunds are processed within 14 days of receiving the returned item.',
    });
    const first = await send(key, {
      content: 'Hi, I am jane.doe@example.com. How long do refunds take?',
    });
    expect(first.status).toBe(200);
    const conversationId = first.body.conversation_id;
    const second = await send(key, {
      conversation_id: conversationId,
      content: 'My card 4111 1111 1111 1111 was charged: when are refunds processed? Call +33 6 12 34 56 78',
    });
    expect(second.body.status).toBe('COMPLETED');
    const ds = await dataset(key);
    const imported = await post(key, `/api/v1/simulation/datasets/${ds.id}/import/conversation/${conversationId}`);
    expect(imported.status).toBe(201);
    expect(imported.body).toMatchObject({
      object: 'simulation_test_case',
      dataset_id: ds.id,
      question: 'Hi, I am [email]. How long do refunds take?',
      expected_type: 'answer',
      expected_answer: second.body.content,
      expected_tool_name: null,
      expected_agent_id: null,
      steps: [{ content: 'My card [card_number] was charged: when are refunds processed? Call [phone]' }],
      metadata: { source_conversation_id: conversationId, pii_redacted: true },
      order: 1,
    });
    const listed = await get(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`);
    expect(listed.body.data).toEqual([imported.body]);
  });

  it('redact_pii: false keeps the text as it was', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, { content: 'Reach me at bob@example.org or 0612345678' });
    const ds = await dataset(key);
    const imported = await post(
      key,
      `/api/v1/simulation/datasets/${ds.id}/import/conversation/${sent.body.conversation_id}`,
      { redact_pii: false },
    );
    expect(imported.status).toBe(201);
    expect(imported.body.question).toBe('Reach me at bob@example.org or 0612345678');
    expect(imported.body.metadata).toMatchObject({ pii_redacted: false });
  });

  it("keeps a test case's bounds: a long message is cut at 4000 characters, steps past 20 are left out", async () => {
    const { key } = await t.tenant();
    // 4500 characters, each an emoji of two UTF-16 units: cut at 4000 characters, not units.
    const first = await send(key, { content: '🙂'.repeat(4500) });
    for (let i = 1; i <= 22; i++) {
      const next = await send(key, { content: `Follow-up ${i}`, conversation_id: first.body.conversation_id });
      expect(next.status).toBe(200);
    }
    const ds = await dataset(key);
    const imported = await post(
      key,
      `/api/v1/simulation/datasets/${ds.id}/import/conversation/${first.body.conversation_id}`,
    );
    expect(imported.status).toBe(201);
    expect(Array.from(imported.body.question as string)).toHaveLength(4000);
    expect(imported.body.steps.map((step: { content: string }) => step.content)).toEqual(
      Array.from({ length: 20 }, (_, i) => `Follow-up ${i + 1}`),
    );
    expect(imported.body.metadata).toMatchObject({ truncated: true });
  });

  it('a tool call becomes a tool_call case whose tool outputs become tool_call_overrides', async () => {
    const { key } = await t.tenant();
    const wf = await post(key, '/api/v1/workflows', {
      name: 'cancel_order',
      input_schema: { type: 'object', properties: { order_id: { type: 'string' } } },
    });
    await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    const sent = await send(key, { content: 'Please cancel_order order_id=A42 for bob@example.org' });
    expect(sent.body.function_calls).toHaveLength(1);
    const ds = await dataset(key);
    const imported = await post(
      key,
      `/api/v1/simulation/datasets/${ds.id}/import/conversation/${sent.body.conversation_id}`,
    );
    expect(imported.body).toMatchObject({
      expected_type: 'tool_call',
      expected_tool_name: 'cancel_order',
      expected_tool_args: { order_id: 'A42' },
      question: 'Please cancel_order order_id=A42 for [email]',
    });
    expect(imported.body.tool_call_overrides).toEqual({ cancel_order: sent.body.function_calls[0].output });
  });

  it('a handoff becomes a handoff case; a declined answer becomes a no_answer case', async () => {
    const { key } = await t.tenant();
    const billing = await agent(key, 'Billing team');
    const front = await agent(key, 'Front desk', [billing.id]);
    const handed = await send(key, { agent_id: front.id, content: 'Put me through to the Billing team' });
    expect(handed.body.handoff).toMatchObject({ agent_id: billing.id });
    const unknown = await send(key, { agent_id: front.id, content: 'What is the airspeed of a swallow?' });
    expect(unknown.body.content).toBe(UNKNOWN_ANSWER);
    const ds = await dataset(key);
    const a = await post(
      key,
      `/api/v1/simulation/datasets/${ds.id}/import/conversation/${handed.body.conversation_id}`,
    );
    expect(a.body).toMatchObject({
      expected_type: 'handoff',
      expected_agent_id: billing.id,
      expected_agent_name: 'Billing team',
    });
    const b = await post(
      key,
      `/api/v1/simulation/datasets/${ds.id}/import/conversation/${unknown.body.conversation_id}`,
    );
    expect(b.body).toMatchObject({ expected_type: 'no_answer', expected_answer: null });
  });

  it('an unknown thread, or another tenant’s, is 404; an unknown dataset is 404', async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const theirs = await send(other.key, { content: 'hello' });
    const ds = await dataset(key);
    expectError(
      await post(key, `/api/v1/simulation/datasets/${ds.id}/import/conversation/${MISSING}`),
      404,
      'not_found',
    );
    expectError(
      await post(key, `/api/v1/simulation/datasets/${ds.id}/import/conversation/${theirs.body.conversation_id}`),
      404,
      'not_found',
    );
    expectError(
      await post(key, `/api/v1/simulation/datasets/${ds.id}/import/conversation/not-a-uuid`),
      404,
      'not_found',
    );
    const mine = await send(key, { content: 'hello' });
    expectError(
      await post(key, `/api/v1/simulation/datasets/${MISSING}/import/conversation/${mine.body.conversation_id}`),
      404,
      'not_found',
    );
    expectError(
      await post(key, `/api/v1/simulation/datasets/${ds.id}/import/conversation/${mine.body.conversation_id}`, {
        redact: true,
      }),
      422,
      'validation_error',
      'redact',
    );
    expect((await get(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`)).body.data).toEqual([]);
  });
});

describe('personal data redaction', () => {
  it('replaces e-mail addresses, Luhn-valid card numbers and phone numbers; keeps order numbers and dates', () => {
    expect(redactText('write to a.b+c@mail.example.co.uk now')).toBe('write to [email] now');
    expect(redactText('card 4539 5787 6362 1486 ok')).toBe('card [card_number] ok');
    expect(redactText('card 4539-5787-6362-1487 bad checksum')).toBe('card 4539-5787-6362-1487 bad checksum');
    expect(redactText('call +1 (555) 010-9999 or 555 010 9999 or 0612345678')).toBe(
      'call [phone] or [phone] or [phone]',
    );
    expect(redactText('order_id=1234567 on 2024-05-01 for 12.50')).toBe('order_id=1234567 on 2024-05-01 for 12.50');
  });

  it('keeps ids whose groups happen to be all digits (a UUID is no phone or card number)', () => {
    for (const id of [
      '01a20fac-8187-7514-9017-aad64f7c477d',
      '12345678-1234-1234-1234-123456789012',
      '4539-5787-6362-1486-abcdef',
      'v1.0612345678.b',
    ]) {
      expect(redactText(`run ${id} done`), id).toBe(`run ${id} done`);
    }
    expect(redactText('call 555-010-9999. Or 0612345678.')).toBe('call [phone]. Or [phone].');
  });

  it('finds a card number beside other digits, cutting only between groups', () => {
    expect(redactText('Please refund card 4111 1111 1111 1111 123 thanks')).toBe(
      'Please refund card [card_number] 123 thanks',
    );
    expect(redactText('pay 4111111111111111 12 euros')).toBe('pay [card_number] 12 euros');
    expect(redactText('ref 12 4539 5787 6362 1486')).toBe('ref 12 [card_number]');
    // No span of whole groups passes Luhn: kept, and never cut inside a group.
    expect(redactText('order 4539578763621487123')).toBe('order 4539578763621487123');
    expect(redactText('codes 4539 5787 6362 1487 12')).toBe('codes 4539 5787 6362 1487 12');
  });

  it('finds e-mail addresses exactly as the one pattern does, however the parts are run together', () => {
    const pattern = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
    // No digits: the card and phone rules find nothing, so only the e-mail rule acts.
    const text = fc.string({
      unit: fc.constantFrom('a', 'b', 'Z', '.', '@', '-', '_', '%', '+', ' ', '[', 'é'),
      maxLength: 40,
    });
    fc.assert(
      fc.property(text, (sample) => redactText(sample) === sample.replace(pattern, '[email]')),
      { seed: 20261124, numRuns: 5000 },
    );
    expect(redactText('x.y@a.co.z@b.com, @c.com d@e')).toBe('[email][email], @c.com d@e');
    expect(redactText(`${'a'.repeat(50_000)} and me@example.com`)).toBe(`${'a'.repeat(50_000)} and [email]`);
  });
});

describe('access', () => {
  it('a simulations:read key reads but cannot write (403 insufficient_scope); no key is 401', async () => {
    const { tenantId, key } = await t.tenant();
    const ds = await dataset(key);
    const reader = await t.key(tenantId, ['simulations:read']);
    expect((await get(reader, `/api/v1/simulation/datasets/${ds.id}`)).status).toBe(200);
    expectError(await post(reader, '/api/v1/simulation/datasets', { name: 'x' }), 403, 'insufficient_scope');
    expectError(await del(reader, `/api/v1/simulation/datasets/${ds.id}`), 403, 'insufficient_scope');
    const none = await t.key(tenantId, ['apps:read']);
    expectError(await get(none, '/api/v1/simulation/datasets'), 403, 'insufficient_scope');
    expectError(await t.call({ url: '/api/v1/simulation/datasets' }), 401, 'not_authenticated');
  });

  it("another tenant's key gets 404 on every id-bearing route, and changes nothing", async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const ds = await dataset(key);
    const tc = await post(key, `/api/v1/simulation/datasets/${ds.id}/test-cases`, {
      question: 'q',
      expected_type: 'no_answer',
    });
    const run = await post(key, `/api/v1/simulation/datasets/${ds.id}/runs`, {});
    const conversation = await post(key, '/api/v1/messages', { content: 'hi' });
    const d = `/api/v1/simulation/datasets/${ds.id}`;
    const attempts = [
      get(other.key, d),
      del(other.key, d),
      get(other.key, `${d}/test-cases`),
      post(other.key, `${d}/test-cases`, { question: 'q', expected_type: 'no_answer' }),
      del(other.key, `${d}/test-cases/${tc.body.id}`),
      post(other.key, `${d}/import/conversation/${conversation.body.conversation_id}`),
      post(other.key, `${d}/runs`, {}),
      get(other.key, `${d}/runs`),
      get(other.key, `/api/v1/simulation/runs/${run.body.id}`),
      get(other.key, `/api/v1/simulation/runs/${run.body.id}/results`),
    ];
    for (const attempt of await Promise.all(attempts)) expectError(attempt, 404, 'not_found');
    expect((await get(other.key, '/api/v1/simulation/datasets')).body.data).toEqual([]);
    const mine = await get(key, d);
    expect(mine.body.test_case_count).toBe(1);
    expect((await get(key, `${d}/runs`)).body.data).toHaveLength(1);
    await t.jobs.runUntilIdle();
  });
});
