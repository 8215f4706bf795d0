// Simulation runs: played on the job queue through the agent's turn engine, one verdict per case
// (answer by meaning, tool call with arguments as a subset, handoff to the expected agent,
// no_answer as a declined answer), live counts and rate, imported cases replayed, a run that
// survives its worker dying mid-way, failed runs, a dataset deleted while its run plays, and the
// LLM judge against a scripted OpenAI-compatible server.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { SIMULATION_RUN_JOB } from '../../src/domain/simulations/index.js';
import { createJobQueue } from '../../src/jobs/queue.js';
import { expectError, lockWaiters, QUEUED_BEHIND, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const post = (key: string, url: string, body?: unknown) => t.call({ method: 'POST', url, key, body });
const get = (key: string, url: string) => t.call({ url, key });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Result = {
  test_case_id: string;
  question: string;
  status: string;
  passed: boolean | null;
  reason: string;
  order: number;
  score: number | null;
  evaluation: { method: string; rationale: string | null };
  outcome: {
    answer: string;
    tool_calls: { name: string; arguments: Record<string, unknown>; output: unknown; type: string }[];
    handoff: { agent_id: string; agent_name: string } | null;
    declined: boolean;
    turns: number;
    transcript: { author: string; content: string; status: string | null }[];
  };
};

type ChatRequest = { model: string; messages: { role: string; content: string | null }[] };

/**
 * A scripted OpenAI-compatible chat server on 127.0.0.1: `handle` gets each request with its
 * system prompt and last message, and answers through `reply` (the model's text) or `res`.
 */
async function chatServer(
  handle: (
    chat: { body: ChatRequest; system: string; last: string; req: IncomingMessage; res: ServerResponse },
    reply: (content: string) => void,
  ) => void,
): Promise<{ server: Server; baseUrl: string }> {
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw) as ChatRequest;
      const system = body.messages[0]?.content ?? '';
      const last = body.messages[body.messages.length - 1]?.content ?? '';
      handle({ body, system, last, req, res }, (content) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, baseUrl: `http://127.0.0.1:${port}/v1` };
}

async function allResults(app: TestApp, key: string, runId: string): Promise<Result[]> {
  const out: Result[] = [];
  let cursor: string | null = null;
  do {
    const page = await app.call({
      url: `/api/v1/simulation/runs/${runId}/results?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      key,
    });
    expect(page.status).toBe(200);
    out.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return out;
}

/** A tenant with two documents, an enabled workflow, and a front-desk agent that may hand off to billing. */
async function seed(app: TestApp = t) {
  const { tenantId, key } = await app.tenant();
  const call = (url: string, body: unknown, method: 'POST' | 'PUT' = 'POST') => app.call({ method, url, key, body });
  expect(
    (
      await call('/api/v1/documents', {
        title: 'Refund policy',
        content: 'Refunds are processed within 14 days of receiving the returned item.',
      })
    ).status,
  ).toBe(201);
  await call('/api/v1/documents', {
    title: 'Shipping times',
    content: 'Standard shipping takes 3 to 5 business days. Express shipping arrives the next business day.',
  });
  const workflow = await call('/api/v1/workflows', {
    name: 'cancel_order',
    description: 'Cancels an order',
    input_schema: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
  });
  expect((await call(`/api/v1/workflows/${workflow.body.id}/enabled`, { enabled: true }, 'PUT')).status).toBe(200);
  const billing = (await call('/api/v1/agents', { name: 'Billing team' })).body;
  const front = (await call('/api/v1/agents', { name: 'Front desk', handoff_agent_ids: [billing.id] })).body;
  return { tenantId, key, billing, front };
}

async function newDataset(key: string, agentId?: string, app: TestApp = t) {
  const created = await app.call({
    method: 'POST',
    url: '/api/v1/simulation/datasets',
    key,
    body: { name: `ds-${Math.random()}`, ...(agentId ? { agent_id: agentId } : {}) },
  });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

async function addCase(key: string, datasetId: string, body: Record<string, unknown>, app: TestApp = t) {
  const created = await app.call({
    method: 'POST',
    url: `/api/v1/simulation/datasets/${datasetId}/test-cases`,
    key,
    body,
  });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

/** Starts a run of the dataset, lets the job queue play it to its end, and reads the run back. */
async function playRun(key: string, datasetId: string, body: Record<string, unknown> = {}, app: TestApp = t) {
  const started = await app.call({ method: 'POST', url: `/api/v1/simulation/datasets/${datasetId}/runs`, key, body });
  await app.jobs.runUntilIdle();
  return (await app.call({ url: `/api/v1/simulation/runs/${started.body.id}`, key })).body;
}

/**
 * A webhook endpoint of the tenant subscribed to `simulation.run.completed`, and a reader of the
 * runs those events reported. Reading drops the deliveries' queued jobs, so no test ever sends one.
 */
async function subscribeToRuns(key: string, tenantId: string) {
  const endpoint = await post(key, '/api/v1/webhook-endpoints', {
    url: 'https://93.184.215.14/runs',
    events: ['simulation.run.completed'],
  });
  expect(endpoint.status).toBe(201);
  return async () => {
    const events = await t.database.db
      .selectFrom('webhook_events')
      .select('payload')
      .where('tenant_id', '=', tenantId)
      .where('type', '=', 'simulation.run.completed')
      .execute();
    await t.database.db
      .deleteFrom('jobs')
      .where('tenant_id', '=', tenantId)
      .where('kind', '=', 'webhook.deliver')
      .where('status', '=', 'queued')
      .execute();
    return events.map((e) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload).data.run);
  };
}

/**
 * What a run deleted with its dataset left: the tenant's conversations and simulation marks, and
 * how the run's job ended.
 */
async function leftBehind(app: TestApp, tenantId: string, runId: string) {
  const db = app.database.db;
  const conversations = await db.selectFrom('conversations').select('id').where('tenant_id', '=', tenantId).execute();
  const marks = await db
    .selectFrom('simulation_conversations')
    .select('conversation_id')
    .where('tenant_id', '=', tenantId)
    .execute();
  const job = await db
    .selectFrom('jobs')
    .select(['status', 'last_error'])
    .where('payload', '@>', sql<never>`${JSON.stringify({ run_id: runId })}::jsonb`)
    .executeTakeFirstOrThrow();
  return { conversations, marks, job };
}
const NOTHING_LEFT = { conversations: [], marks: [], job: { status: 'succeeded', last_error: null } };

describe('a run of every expected type', () => {
  it('passes and fails exactly the cases it should: 8 cases, 4 passed, 4 failed, success_rate 0.5', async () => {
    const { key, billing, front } = await seed();
    const ds = await newDataset(key, front.id);
    const cases = [
      // should pass
      {
        question: 'How long do refunds take?',
        expected_type: 'answer',
        expected_answer: 'Refunds are processed in 14 days.',
      },
      {
        question: 'Please cancel_order order_id=A42',
        expected_type: 'tool_call',
        expected_tool_name: 'cancel_order',
        expected_tool_args: { order_id: 'A42' },
      },
      { question: 'Can I speak to the Billing team?', expected_type: 'handoff', expected_agent_id: billing.id },
      { question: 'What is the airspeed velocity of an unladen swallow?', expected_type: 'no_answer' },
      // should fail
      {
        question: 'How long does standard shipping take?',
        expected_type: 'answer',
        expected_answer: 'Refunds are processed in 14 days.',
      },
      {
        question: 'Please cancel_order order_id=B7',
        expected_type: 'tool_call',
        expected_tool_name: 'cancel_order',
        expected_tool_args: { order_id: 'A42' },
      },
      { question: 'How long do refunds take?', expected_type: 'handoff', expected_agent_id: billing.id },
      { question: 'How long do refunds take?', expected_type: 'no_answer' },
    ];
    const ids = [];
    for (const c of cases) ids.push(await addCase(key, ds, c));

    // A bodiless POST starts a run with the dataset's agent.
    const started = await post(key, `/api/v1/simulation/datasets/${ds}/runs`);
    expect(started.status).toBe(201);
    expect(started.body).toEqual({
      id: expect.any(String),
      status: 'queued',
      object: 'simulation_run',
      dataset_id: ds,
      dataset_name: expect.any(String),
      agent_id: front.id,
      agent_name: 'Front desk',
      total_tests: 8,
      passed_tests: 0,
      failed_tests: 0,
      success_rate: null,
      error_message: null,
      started_at: null,
      completed_at: null,
      created_at: expect.any(String),
    });
    const pending = await allResults(t, key, started.body.id);
    expect(pending.map((r) => [r.status, r.passed])).toEqual(Array(8).fill(['pending', null]));

    await t.jobs.runUntilIdle();

    const run = await get(key, `/api/v1/simulation/runs/${started.body.id}`);
    expect(run.body).toMatchObject({
      status: 'completed',
      total_tests: 8,
      passed_tests: 4,
      failed_tests: 4,
      success_rate: 0.5,
      error_message: null,
    });
    expect(Date.parse(run.body.completed_at)).toBeGreaterThanOrEqual(Date.parse(run.body.started_at));

    const results = await allResults(t, key, started.body.id);
    expect(results.map((r) => r.test_case_id)).toEqual(ids);
    expect(results.map((r) => r.order)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(results.map((r) => r.passed)).toEqual([true, true, true, true, false, false, false, false]);
    const [answer, tool, handoff, none, badAnswer, badTool, badHandoff, badNone] = results as Result[] &
      [Result, Result, Result, Result, Result, Result, Result, Result];
    expect(answer.outcome.answer).toContain('14 days');
    expect(answer.evaluation.method).toBe('token_overlap');
    expect(answer.score).toBeGreaterThan(0);
    expect(tool.outcome.tool_calls).toMatchObject([
      { name: 'cancel_order', arguments: { order_id: 'A42' }, type: 'workflow' },
    ]);
    expect(handoff.outcome.handoff).toEqual({ agent_id: billing.id, agent_name: 'Billing team' });
    expect(none.outcome.declined).toBe(true);
    expect(badAnswer.reason).toMatch(/does not match the expected answer/);
    expect(badTool.reason).toMatch(/does not include the expected arguments/);
    expect(badHandoff.reason).toMatch(/did not hand the conversation over/);
    expect(badNone.reason).toMatch(/answered instead of declining/);

    // Simulated turns stay apart: their conversations are gone once judged (the transcript is
    // kept in the result), and the "don't know" answer did not reach the knowledge-gap queue.
    expect(none.outcome.transcript).toEqual([
      { author: 'customer', content: 'What is the airspeed velocity of an unladen swallow?', status: null },
      {
        author: 'agent',
        content: expect.stringContaining("don't know"),
        status: 'COMPLETED',
        message_id: expect.any(String),
      },
    ]);
    expect((await get(key, '/api/v1/conversations')).body.data).toEqual([]);
    const marked = await t.database.db
      .selectFrom('simulation_conversations')
      .select('conversation_id')
      .where('run_id', '=', started.body.id)
      .execute();
    expect(marked).toEqual([]);
    expect((await get(key, '/api/v1/knowledge-update-requests')).body.data).toEqual([]);

    const listed = await get(key, `/api/v1/simulation/datasets/${ds}/runs`);
    expect(listed.body.data.map((r: { id: string }) => r.id)).toEqual([started.body.id]);
    expect(listed.body.data[0]).toEqual(run.body);
  });

  it('plays steps in one conversation and answers tools from the overrides (client functions and workflows)', async () => {
    const { tenantId, key, front } = await seed();
    const ds = await newDataset(key, front.id);
    await addCase(key, ds, {
      question: 'Where is my parcel? lookup_order order_id=9',
      expected_type: 'tool_call',
      expected_tool_name: 'lookup_order',
      expected_tool_args: { order_id: 9 },
      tool_call_overrides: { lookup_order: { status: 'shipped' } },
    });
    await addCase(key, ds, {
      question: 'Hello',
      expected_type: 'tool_call',
      expected_tool_name: 'cancel_order',
      expected_tool_args: { order_id: 'Z1' },
      api_data_overrides: { cancel_order: { refunded: 12.5 } },
      steps: [{ content: 'Then please cancel_order order_id=Z1' }],
    });
    const run = await playRun(key, ds, { agent_id: front.id });
    expect(run).toMatchObject({
      status: 'completed',
      passed_tests: 2,
      failed_tests: 0,
      success_rate: 1,
    });
    const [lookup, cancel] = (await allResults(t, key, run.id)) as [Result, Result];
    expect(lookup.outcome.tool_calls).toMatchObject([
      { name: 'lookup_order', type: 'client', arguments: { order_id: '9' }, output: { status: 'shipped' } },
    ]);
    expect(cancel.outcome.turns).toBe(2);
    expect(cancel.outcome.tool_calls).toMatchObject([{ name: 'cancel_order', output: { refunded: 12.5 } }]);
    const runs = await t.database.db
      .selectFrom('workflow_runs')
      .select(['workflow_name', 'overridden'])
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(runs).toEqual([{ workflow_name: 'cancel_order', overridden: true }]);
    expect(cancel.outcome.transcript.map((m) => m.author)).toEqual(['customer', 'agent', 'customer', 'agent']);
    expect(cancel.outcome.transcript[2]?.content).toBe('Then please cancel_order order_id=Z1');
  });

  // PostgreSQL only: a session holding a table lock while the run writes needs a second session.
  it.runIf(usingPostgres)("a played case's conversation is never visible without its simulation mark", async () => {
    const { tenantId, key } = await t.tenant();
    const ds = await newDataset(key);
    await addCase(key, ds, { question: 'What is the airspeed of a swallow?', expected_type: 'no_answer' });
    await t.database.db.connection().execute(async (session) => {
      // Marks wait on this lock: whatever the run has committed by then is visible here.
      await sql`begin`.execute(session);
      await sql`lock table simulation_conversations in share mode`.execute(session);
      const played = playRun(key, ds);
      expect(await lockWaiters(session, sql`relation = 'simulation_conversations'::regclass`)).toBe(1);
      const unmarked = await sql<{ id: string }>`
        select c.id from conversations c
        where c.tenant_id = ${tenantId}
          and not exists (select 1 from simulation_conversations s where s.conversation_id = c.id)`.execute(session);
      expect(unmarked.rows).toEqual([]);
      await sql`commit`.execute(session);
      expect(await played).toMatchObject({ status: 'completed', passed_tests: 1 });
    });
  });

  it('counts and success_rate are readable while the run plays', async () => {
    const { key, front } = await seed();
    const ds = await newDataset(key, front.id);
    for (let i = 0; i < 12; i++)
      await addCase(key, ds, { question: `Unknown thing ${i}?`, expected_type: 'no_answer' });
    const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {});
    // The job's handler is run here so the run can be read after each case it records.
    const claimed = await t.jobs.claim();
    if (!claimed) throw new Error('nothing claimed');
    expect(claimed.job.payload).toEqual({ run_id: run.body.id });
    const seen: { status: string; done: number; rate: number | null }[] = [];
    const heartbeat = async () => {
      const live = await get(key, `/api/v1/simulation/runs/${run.body.id}`);
      seen.push({
        status: live.body.status,
        done: live.body.passed_tests + live.body.failed_tests,
        rate: live.body.success_rate,
      });
    };
    await t.services.simulations.runJob(claimed.job, { heartbeat, signal: new AbortController().signal });
    expect(await t.jobs.complete(claimed)).toBe(true);
    expect(seen).toHaveLength(12);
    expect(seen.every((s) => s.status === 'running' && s.done >= 1 && s.done <= 12 && s.rate === 1)).toBe(true);
    // The counts only grow.
    expect(seen.map((s) => s.done)).toEqual([...seen.map((s) => s.done)].sort((a, b) => a - b));
    expect((await get(key, `/api/v1/simulation/runs/${run.body.id}`)).body).toMatchObject({
      status: 'completed',
      passed_tests: 12,
      success_rate: 1,
    });
  });
});

describe('imported cases', () => {
  it('a case imported from a conversation made through POST /messages replays and passes', async () => {
    const { key, front, billing } = await seed();
    const send = (body: unknown) => post(key, '/api/v1/messages', body);
    const answered = await send({
      agent_id: front.id,
      content: 'Mail me at ann@example.com: how long do refunds take?',
    });
    const followed = await send({
      conversation_id: answered.body.conversation_id,
      content: 'And refunds to card 4111 1111 1111 1111?',
    });
    expect(followed.body.status).toBe('COMPLETED');
    const tool = await send({ agent_id: front.id, content: 'cancel_order order_id=Q9 please' });
    const handed = await send({ agent_id: front.id, content: 'Billing team, please' });
    const unknown = await send({ agent_id: front.id, content: 'Do you sell submarines?' });
    const ds = await newDataset(key, front.id);
    const imported: { expected_type: string; steps: unknown; expected_agent_id: string }[] = [];
    for (const sent of [answered, tool, handed, unknown]) {
      const created = await post(
        key,
        `/api/v1/simulation/datasets/${ds}/import/conversation/${sent.body.conversation_id}`,
      );
      expect(created.status).toBe(201);
      imported.push(created.body);
    }
    expect(imported.map((c) => c.expected_type)).toEqual(['answer', 'tool_call', 'handoff', 'no_answer']);
    expect(imported[0]?.steps).toEqual([{ content: 'And refunds to card [card_number]?' }]);
    expect(imported[2]?.expected_agent_id).toBe(billing.id);

    const run = await playRun(key, ds);
    expect(run).toMatchObject({
      status: 'completed',
      total_tests: 4,
      passed_tests: 4,
      failed_tests: 0,
      success_rate: 1,
    });
    const results = await allResults(t, key, run.id);
    expect(results[0]?.outcome.turns).toBe(2);
  });
});

describe('surviving a restart', () => {
  it('a run whose worker dies mid-way finishes on another queue: every case played and recorded exactly once', async () => {
    const { tenantId, key, front } = await seed();
    const ds = await newDataset(key, front.id);
    const total = 10;
    const ids = [];
    for (let i = 0; i < total; i++) {
      ids.push(
        // Each play runs the workflow once (no override), so workflow runs count the plays.
        await addCase(key, ds, {
          question: `Please cancel_order order_id=R${i}`,
          expected_type: 'tool_call',
          expected_tool_name: 'cancel_order',
          expected_tool_args: { order_id: `R${i}` },
        }),
      );
    }
    const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {});
    const runId = run.body.id as string;

    // Worker A claims the job with a short lease and dies after at least 3 cases: its handler
    // stops (signal aborted) and nothing finishes the job, as if the process had gone.
    const quiet = { info() {}, warn() {}, error() {} };
    const workerA = createJobQueue({ db: t.database.db, log: quiet, leaseMs: 300 });
    workerA.register(SIMULATION_RUN_JOB, t.services.simulations.runJob);
    const claimed = await workerA.claim();
    expect(claimed?.job.payload).toEqual({ run_id: runId });
    if (!claimed) throw new Error('nothing claimed');
    const death = new AbortController();
    let beats = 0;
    const heartbeat = async () => {
      beats += 1;
      if (beats === 3) death.abort(new Error('worker A died'));
    };
    await expect(t.services.simulations.runJob(claimed.job, { heartbeat, signal: death.signal })).rejects.toThrow(
      'worker A died',
    );
    const done = () =>
      t.database.db
        .selectFrom('simulation_results')
        .select('id')
        .where('run_id', '=', runId)
        .where('status', 'in', ['passed', 'failed'])
        .execute();
    const afterA = (await done()).length;
    expect(afterA).toBeGreaterThanOrEqual(3);
    expect(afterA).toBeLessThan(total);
    const midway = await get(key, `/api/v1/simulation/runs/${runId}`);
    expect(midway.body.status).toBe('running');
    expect(midway.body.passed_tests + midway.body.failed_tests).toBe(afterA);

    // One more case was mid-play when A died: it holds a conversation but no verdict.
    const stranded = await post(key, '/api/v1/messages', { agent_id: front.id, content: 'half played' });
    const pendingRow = await t.database.db
      .selectFrom('simulation_results')
      .select(['id', 'test_case_id'])
      .where('run_id', '=', runId)
      .where('status', '=', 'pending')
      .orderBy('position')
      .executeTakeFirstOrThrow();
    await t.database.db
      .insertInto('simulation_conversations')
      .values({
        conversation_id: stranded.body.conversation_id,
        tenant_id: tenantId,
        run_id: runId,
        test_case_id: pendingRow.test_case_id,
      })
      .execute();
    await t.database.db
      .updateTable('simulation_results')
      .set({ status: 'running', attempt: claimed.job.attempts, conversation_id: stranded.body.conversation_id })
      .where('id', '=', pendingRow.id)
      .execute();

    // A's lease lapses; the app's queue (another worker) takes the job over and finishes it.
    await sleep(400);
    await t.jobs.runUntilIdle();
    const job = await t.database.db
      .selectFrom('jobs')
      .select(['status', 'attempts'])
      .where('id', '=', claimed.job.id)
      .executeTakeFirstOrThrow();
    expect(job).toEqual({ status: 'succeeded', attempts: 2 });

    const final = await get(key, `/api/v1/simulation/runs/${runId}`);
    expect(final.body).toMatchObject({ status: 'completed', total_tests: total, passed_tests: total, failed_tests: 0 });
    const results = await allResults(t, key, runId);
    expect(results.map((r) => r.test_case_id)).toEqual(ids);
    expect(results.every((r) => r.passed === true)).toBe(true);
    // Every case played exactly once: one workflow run per order; the stranded half-play's
    // conversation discarded, and no simulated conversation left behind.
    const plays = await t.database.db
      .selectFrom('workflow_runs')
      .select('arguments')
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(plays.map((p) => (p.arguments as { order_id: string }).order_id).sort()).toEqual(
      Array.from({ length: total }, (_, i) => `R${i}`).sort(),
    );
    const marked = await t.database.db
      .selectFrom('simulation_conversations')
      .select('conversation_id')
      .where('run_id', '=', runId)
      .execute();
    expect(marked).toEqual([]);
    expectError(await get(key, `/api/v1/conversations/${stranded.body.conversation_id}`), 404, 'not_found');
    const attempts = await t.database.db
      .selectFrom('simulation_results')
      .select(['test_case_id', 'attempt'])
      .where('run_id', '=', runId)
      .execute();
    expect(attempts.filter((a) => a.attempt === 2).length).toBe(total - afterA);
  });

  it('a worker that lost its lease cannot record a verdict the new owner holds', async () => {
    const { key, front } = await seed();
    const ds = await newDataset(key, front.id);
    await addCase(key, ds, { question: 'Nobody knows this?', expected_type: 'no_answer' });
    const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {});
    const quiet = { info() {}, warn() {}, error() {} };
    const stale = createJobQueue({ db: t.database.db, log: quiet, leaseMs: 200 });
    stale.register(SIMULATION_RUN_JOB, t.services.simulations.runJob);
    const claimed = await stale.claim();
    if (!claimed) throw new Error('nothing claimed');
    expect(claimed.job.payload).toEqual({ run_id: run.body.id });
    // The new owner (attempt 2) already holds the only case.
    await t.database.db
      .updateTable('simulation_results')
      .set({ status: 'running', attempt: claimed.job.attempts + 1 })
      .where('run_id', '=', run.body.id)
      .execute();
    await t.services.simulations.runJob(claimed.job, {
      heartbeat: async () => {},
      signal: new AbortController().signal,
    });
    const row = await t.database.db
      .selectFrom('simulation_results')
      .select(['status', 'attempt'])
      .where('run_id', '=', run.body.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'running', attempt: claimed.job.attempts + 1 });
    expect((await get(key, `/api/v1/simulation/runs/${run.body.id}`)).body).toMatchObject({
      status: 'running',
      passed_tests: 0,
      failed_tests: 0,
    });
    // Let the real owner finish: reset the case as if it had died too.
    await t.database.db
      .updateTable('simulation_results')
      .set({ status: 'pending', attempt: null })
      .where('run_id', '=', run.body.id)
      .execute();
    await stale.complete(claimed);
    await t.services.simulations.runJob(
      { ...claimed.job, attempts: claimed.job.attempts + 2 },
      { heartbeat: async () => {}, signal: new AbortController().signal },
    );
    expect((await get(key, `/api/v1/simulation/runs/${run.body.id}`)).body).toMatchObject({
      status: 'completed',
      passed_tests: 1,
    });
  });
});

describe('failed runs and refusals', () => {
  it('a run whose agent disappeared before it played is failed with error_message', async () => {
    const { key } = await seed();
    const lone = (await post(key, '/api/v1/agents', { name: 'Temporary' })).body;
    const ds = await newDataset(key);
    await addCase(key, ds, { question: 'Anything?', expected_type: 'no_answer' });
    const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, { agent_id: lone.id });
    expect(run.body.agent_name).toBe('Temporary');
    await t.database.db.deleteFrom('agents').where('id', '=', lone.id).execute();
    await t.jobs.runUntilIdle();
    const failed = await get(key, `/api/v1/simulation/runs/${run.body.id}`);
    expect(failed.body).toMatchObject({
      status: 'failed',
      error_message: "The agent 'Temporary' no longer exists.",
      passed_tests: 0,
      failed_tests: 0,
      success_rate: null,
    });
    expect(failed.body.completed_at).not.toBeNull();
  });

  /** A run of one case, started, in a tenant subscribed to the runs' completion events. */
  async function reportedRun() {
    const { tenantId, key, front } = await seed();
    const reported = await subscribeToRuns(key, tenantId);
    const ds = await newDataset(key, front.id);
    await addCase(key, ds, { question: 'Anything?', expected_type: 'no_answer' });
    const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {});
    return { tenantId, key, ds, run, reported };
  }

  it('a run whose job failed for good reads as failed with the job error, and is reported once', async () => {
    const { key, ds, run, reported } = await reportedRun();
    const row = await t.database.db
      .selectFrom('simulation_runs')
      .select('job_id')
      .where('id', '=', run.body.id)
      .executeTakeFirstOrThrow();
    await t.database.db
      .updateTable('jobs')
      .set({ status: 'failed', last_error: 'the job was interrupted on every attempt', finished_at: new Date() })
      .where('id', '=', row.job_id as string)
      .execute();
    const failed = await get(key, `/api/v1/simulation/runs/${run.body.id}`);
    expect(failed.body).toMatchObject({ status: 'failed', error_message: 'the job was interrupted on every attempt' });
    expect((await get(key, `/api/v1/simulation/datasets/${ds}/runs`)).body.data[0]).toMatchObject({ status: 'failed' });
    expect(await reported()).toEqual([failed.body]);
    await t.jobs.runUntilIdle();
    expect((await get(key, `/api/v1/simulation/runs/${run.body.id}`)).body.status).toBe('failed');
    expect(await reported()).toEqual([failed.body]);
  });

  it('a run whose worker died on every attempt is failed by the queue and sends simulation.run.completed once', async () => {
    const { tenantId, key, ds, run, reported } = await reportedRun();
    // Its last attempt's worker died: the lease lapsed with the attempts used up.
    await sql`
      update jobs set status = 'running', attempts = max_attempts, locked_until = now() - interval '1 second'
      where tenant_id = ${tenantId} and kind = ${SIMULATION_RUN_JOB}`.execute(t.database.db);
    const claimed = await t.jobs.claim();
    expect(claimed?.job.payload).toEqual({ run_id: run.body.id });
    if (!claimed) throw new Error('nothing claimed');
    await t.jobs.run(claimed);
    const job = await t.database.db
      .selectFrom('jobs')
      .select('status')
      .where('tenant_id', '=', tenantId)
      .where('kind', '=', SIMULATION_RUN_JOB)
      .executeTakeFirstOrThrow();
    expect(job.status).toBe('failed');
    const failed = await get(key, `/api/v1/simulation/runs/${run.body.id}`);
    expect(failed.body).toMatchObject({
      status: 'failed',
      error_message: 'the job was interrupted on every attempt (its worker stopped responding)',
      passed_tests: 0,
      failed_tests: 0,
    });
    expect((await get(key, `/api/v1/simulation/datasets/${ds}/runs`)).body.data[0]).toEqual(failed.body);
    expect(await reported()).toEqual([failed.body]);
  });

  it('refuses: unknown agent_id (422 invalid_parameters), empty dataset (409), unknown dataset and run (404)', async () => {
    const { key } = await t.tenant();
    const ds = await newDataset(key);
    expectError(await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {}), 409, 'conflict');
    await addCase(key, ds, { question: 'q', expected_type: 'no_answer' });
    expectError(
      await post(key, `/api/v1/simulation/datasets/${ds}/runs`, { agent_id: '0190a0a0-0000-7000-8000-000000000000' }),
      422,
      'invalid_parameters',
      'agent_id',
    );
    expectError(
      await post(key, `/api/v1/simulation/datasets/${ds}/runs`, { agent: 'x' }),
      422,
      'validation_error',
      'agent',
    );
    expectError(await post(key, `/api/v1/simulation/datasets/${ds}/runs`, 'text'), 400, 'bad_request');
    expectError(
      await post(key, '/api/v1/simulation/datasets/0190a0a0-0000-7000-8000-000000000000/runs', {}),
      404,
      'not_found',
    );
    expectError(await get(key, '/api/v1/simulation/runs/0190a0a0-0000-7000-8000-000000000000'), 404, 'not_found');
    expectError(await get(key, '/api/v1/simulation/runs/nope/results'), 404, 'not_found');
    expect((await get(key, `/api/v1/simulation/datasets/${ds}/runs`)).body.data).toEqual([]);
  });

  it('an order cursor past the 32-bit range of a position is 422 validation_error naming cursor, on cases and results', async () => {
    const { key } = await seed();
    const ds = await newDataset(key);
    await addCase(key, ds, { question: 'Meaning of life?', expected_type: 'no_answer' });
    const run = await playRun(key, ds);
    const id = '0190a0a0-0000-7000-8000-000000000000';
    const cursor = (position: string) => Buffer.from(`${position}:${id}`, 'utf8').toString('base64url');
    for (const url of [`/api/v1/simulation/datasets/${ds}/test-cases`, `/api/v1/simulation/runs/${run.id}/results`]) {
      for (const position of ['2147483648', '-2147483649', '9999999999']) {
        expectError(await get(key, `${url}?cursor=${cursor(position)}`), 422, 'validation_error', 'cursor');
      }
      // The range's ends are positions a cursor may carry: an empty page, not an error.
      for (const position of ['2147483647', '-2147483648']) {
        const page = await get(key, `${url}?cursor=${cursor(position)}`);
        expect(page.status).toBe(200);
      }
    }
  });
});

describe('stopping the server mid-run', () => {
  let server: Server;
  let a: TestApp;
  const held: NodeJS.Timeout[] = [];
  /** A question marker, and what learns when its first request arrived (it is held). */
  const holds = new Map<string, () => void>();
  const arrivalOf = (marker: string) =>
    new Promise<void>((resolve) => {
      holds.set(marker, resolve);
    });

  beforeAll(async () => {
    // The agent answers every question at once except the first one with a marker awaited by
    // `arrivalOf`, held for 3 s: the test stops while that case plays. The judge passes answers
    // about 14 days.
    let baseUrl: string;
    ({ server, baseUrl } = await chatServer(({ system, last }, reply) => {
      const content = system.startsWith('You grade')
        ? `Verdict: ${JSON.stringify({ pass: /14 days/.test(last.split('ACTUAL:\n')[1] ?? ''), score: 1, rationale: 'Same.' })}`
        : 'Refunds take 14 days.';
      const answer = () => reply(content);
      const marker = [...holds.keys()].find((m) => last.includes(m));
      const arrived = marker === undefined || system.startsWith('You grade') ? undefined : holds.get(marker);
      if (marker && arrived) {
        holds.delete(marker);
        held.push(setTimeout(answer, 3000));
        arrived();
      } else answer();
    }));
    a = await startTestApp(
      {
        LLM_BASE_URL: baseUrl,
        LLM_MODEL: 'm',
        SIMULATION_CONCURRENCY: '1',
        JOB_STOP_GRACE_MS: '300',
        JOB_POLL_MS: '20',
      },
      { startJobs: true },
    );
  });
  afterAll(async () => {
    for (const timer of held) clearTimeout(timer);
    await a?.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a run stopped with the server keeps its unplayed cases without verdict, and the next server finishes it', async () => {
    const { key } = await a.tenant();
    const ds = await newDataset(key, undefined, a);
    const questions = ['Refunds 1?', 'Refunds 2?', 'Refunds 3 (slow)?', 'Refunds 4?', 'Refunds 5?', 'Refunds 6?'];
    for (const question of questions) {
      await addCase(key, ds, { question, expected_type: 'answer', expected_answer: 'Refunds take 14 days.' }, a);
    }
    const slowCase = arrivalOf('(slow)');
    const run = await a.call({ method: 'POST', url: `/api/v1/simulation/datasets/${ds}/runs`, key });
    expect(run.status).toBe(201);
    await slowCase;
    // The server stops while the third case waits for the model: past the grace period the queue
    // stops the job, which cuts the turn short and puts the case back.
    await a.app.close();
    const db = a.database.db;
    const results = () =>
      db
        .selectFrom('simulation_results')
        .select(['position', 'status', 'attempt', 'conversation_id'])
        .where('run_id', '=', run.body.id)
        .orderBy('position')
        .execute();
    expect((await results()).map((r) => r.status)).toEqual([
      'passed',
      'passed',
      'pending',
      'pending',
      'pending',
      'pending',
    ]);
    const stopped = await db
      .selectFrom('simulation_runs')
      .select(['status', 'passed_tests', 'failed_tests', 'completed_at'])
      .where('id', '=', run.body.id)
      .executeTakeFirstOrThrow();
    expect(stopped).toEqual({ status: 'running', passed_tests: 2, failed_tests: 0, completed_at: null });
    // The stop is not the job's failure: queued again, due now, its attempt not counted.
    const job = await db
      .selectFrom('jobs')
      .select(['status', 'attempts', sql<boolean>`run_at <= now()`.as('due')])
      .where('payload', '@>', sql<never>`${JSON.stringify({ run_id: run.body.id })}::jsonb`)
      .executeTakeFirstOrThrow();
    expect(job).toEqual({ status: 'queued', attempts: 0, due: true });
    // The half-played case left no conversation behind.
    const marked = await db
      .selectFrom('simulation_conversations')
      .select('conversation_id')
      .where('run_id', '=', run.body.id)
      .execute();
    expect(marked).toEqual([]);

    // The restarted server, on the same database, plays the cases left and completes the run.
    const next = await buildApp({ config: a.config, db });
    try {
      await next.jobs.runUntilIdle();
      const read = async (url: string) =>
        JSON.parse((await next.app.inject({ url, headers: { 'x-api-key': key } })).body);
      expect(await read(`/api/v1/simulation/runs/${run.body.id}`)).toMatchObject({
        status: 'completed',
        total_tests: 6,
        passed_tests: 6,
        failed_tests: 0,
      });
      const list = await read(`/api/v1/simulation/runs/${run.body.id}/results`);
      expect(list.data.map((r: Result) => [r.question, r.passed, r.outcome.turns])).toEqual(
        questions.map((q) => [q, true, 1]),
      );
    } finally {
      await next.app.close();
    }
  });

  it('simulations closed while a run plays leave the cut-short case without verdict, and the job retries', async () => {
    const c = await startTestApp({
      LLM_BASE_URL: a.config.llmBaseUrl ?? '',
      LLM_MODEL: 'm',
      SIMULATION_CONCURRENCY: '1',
    });
    try {
      const { key } = await c.tenant();
      const ds = await newDataset(key, undefined, c);
      for (const question of ['Refunds 1?', 'Refunds 2 (closing)?', 'Refunds 3?']) {
        await addCase(key, ds, { question, expected_type: 'answer', expected_answer: 'Refunds take 14 days.' }, c);
      }
      const closing = arrivalOf('(closing)');
      const run = await c.call({ method: 'POST', url: `/api/v1/simulation/datasets/${ds}/runs`, key });
      const played = c.jobs.runUntilIdle();
      await closing;
      await c.services.simulations.close();
      await played;
      const rows = await c.database.db
        .selectFrom('simulation_results')
        .select('status')
        .where('run_id', '=', run.body.id)
        .orderBy('position')
        .execute();
      expect(rows.map((r) => r.status)).toEqual(['passed', 'pending', 'pending']);
      expect((await c.call({ url: `/api/v1/simulation/runs/${run.body.id}`, key })).body).toMatchObject({
        status: 'running',
        passed_tests: 1,
        failed_tests: 0,
      });
      // Not stopped by the queue, so an ordinary failed attempt: retried later, by any server.
      const job = await c.database.db
        .selectFrom('jobs')
        .select(['status', 'attempts'])
        .where('payload', '@>', sql<never>`${JSON.stringify({ run_id: run.body.id })}::jsonb`)
        .executeTakeFirstOrThrow();
      expect(job).toEqual({ status: 'queued', attempts: 1 });
    } finally {
      await c.close();
    }
  });
});

// PostgreSQL only: second sessions pause the runner and hold rows while the delete comes in. On
// PGlite transactions never interleave, so there is nothing to force.
describe('deleting the dataset while its run plays', () => {
  it.runIf(usingPostgres)(
    "a turn's last write and the delete wait for each other: 200, the turn never fails, nothing is left",
    async () => {
      const { tenantId, key } = await t.tenant();
      const ds = await newDataset(key);
      await addCase(key, ds, { question: 'What is the airspeed of a swallow?', expected_type: 'no_answer' });
      const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {});
      // The runner's engine reports a turn that failed unexpectedly on stderr.
      const stderr = vi.spyOn(process.stderr, 'write');
      try {
        const db = t.database.db;
        await db.connection().execute((pause) =>
          db.connection().execute(async (hold) => {
            // The turn reads the workflows (its tools) once its conversation and messages exist.
            await sql`begin`.execute(pause);
            await sql`lock table workflows in access exclusive mode`.execute(pause);
            const played = t.jobs.runUntilIdle();
            expect(await lockWaiters(pause, sql`relation = 'workflows'::regclass`)).toBe(1);
            // The agent's message is held, so the turn's last write waits for it.
            await sql`begin`.execute(hold);
            await sql`select 1 from messages where tenant_id = ${tenantId} and author = 'agent' for update`.execute(
              hold,
            );
            await sql`commit`.execute(pause);
            expect(await lockWaiters(hold, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
            // The delete comes in and waits for that write.
            const deleting = t.call({ method: 'DELETE', url: `/api/v1/simulation/datasets/${ds}`, key });
            expect(await lockWaiters(hold, QUEUED_BEHIND)).toBe(1);
            await sql`commit`.execute(hold);
            const deleted = await deleting;
            expect(deleted.status).toBe(200);
            expect(deleted.body).toEqual({ id: ds, object: 'deleted', deleted: true });
            await played;
          }),
        );
        const written = stderr.mock.calls.map(([chunk]) => String(chunk));
        expect(written.filter((line) => line.includes('agent turn failed'))).toEqual([]);
      } finally {
        stderr.mockRestore();
      }
      expect(await leftBehind(t, tenantId, run.body.id)).toEqual(NOTHING_LEFT);
    },
  );

  it.runIf(usingPostgres)(
    'a case recorded while the delete runs waits for it: 200, the run stops, nothing is left',
    async () => {
      const { tenantId, key } = await t.tenant();
      const ds = await newDataset(key);
      // With overrides, the runner reads the workflows before it starts a case's conversation.
      for (const question of ['First?', 'Second?']) {
        await addCase(key, ds, { question, expected_type: 'no_answer', tool_call_overrides: { lookup_order: {} } });
      }
      const run = await post(key, `/api/v1/simulation/datasets/${ds}/runs`, {});
      const db = t.database.db;
      await db.connection().execute((hold) =>
        db.connection().execute(async (pause) => {
          // The first case's result is held: the runner skips it, and the delete waits for it.
          await sql`begin`.execute(hold);
          await sql`select 1 from simulation_results where run_id = ${run.body.id} and position = 1 for update`.execute(
            hold,
          );
          await sql`begin`.execute(pause);
          await sql`lock table workflows in access exclusive mode`.execute(pause);
          const played = t.jobs.runUntilIdle();
          // The runner has claimed the second case and has not started its conversation.
          expect(await lockWaiters(pause, sql`relation = 'workflows'::regclass`)).toBe(1);
          const deleting = t.call({ method: 'DELETE', url: `/api/v1/simulation/datasets/${ds}`, key });
          // The delete has taken the run and waits for the held result.
          expect(await lockWaiters(hold, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
          // The second case plays, in a conversation the delete never saw; its verdict's record
          // waits for the delete.
          await sql`commit`.execute(pause);
          expect(await lockWaiters(hold, QUEUED_BEHIND)).toBe(1);
          await sql`commit`.execute(hold);
          expect((await deleting).status).toBe(200);
          await played;
        }),
      );
      expect(await leftBehind(t, tenantId, run.body.id)).toEqual(NOTHING_LEFT);
    },
  );
});

describe('the LLM judge', () => {
  let llm: TestApp;
  let server: Server;
  const judged: { model: string; authorization: string | undefined; prompt: string }[] = [];
  /** Receives the verdict of a case marked "(judged late)", held until the test sends it. */
  let lateVerdict: ((send: () => void) => void) | undefined;

  /**
   * A run of one case whose verdict the judge holds back: answers once the case's turn has ended
   * and been written, with the run, the queue's play of it, and the function that sends the verdict.
   */
  async function runJudgedLate(key: string) {
    const ds = await newDataset(key, undefined, llm);
    await addCase(
      key,
      ds,
      { question: 'Refunds? (judged late)', expected_type: 'answer', expected_answer: 'About two weeks.' },
      llm,
    );
    const judging = new Promise<() => void>((resolve) => {
      lateVerdict = resolve;
    });
    const run = await llm.call({ method: 'POST', url: `/api/v1/simulation/datasets/${ds}/runs`, key });
    const played = llm.jobs.runUntilIdle();
    return { ds, run, played, sendVerdict: await judging };
  }

  beforeAll(async () => {
    // A scripted OpenAI-compatible server: the agent answers, the judge grades.
    let baseUrl: string;
    ({ server, baseUrl } = await chatServer(({ body, system, last, req, res }, reply) => {
      if (system.startsWith('You grade') && last.includes('(judged late)')) {
        lateVerdict?.(() => reply(`Verdict: ${JSON.stringify({ pass: true, score: 1, rationale: 'Late.' })}`));
        return;
      }
      if (system.startsWith('You grade') && last.includes('judge is down')) {
        res.writeHead(503).end();
        return;
      }
      if (system.startsWith('You grade') && last.includes('judge rambles')) reply('I would say it passes.');
      else if (system.startsWith('You grade')) {
        judged.push({ model: body.model, authorization: req.headers.authorization, prompt: last });
        const actual = last.split('ACTUAL:\n')[1] ?? '';
        const pass = last.includes('expected to decline') ? /do not know/i.test(actual) : /two weeks/i.test(actual);
        reply(
          `Verdict: ${JSON.stringify({ pass, score: pass ? 0.9 : 0.1, rationale: pass ? 'Same meaning: about two weeks.' : 'It is about something else.' })}`,
        );
      } else if (/refund/i.test(last)) reply('A refund reaches you in about two weeks.');
      else if (/ship/i.test(last)) reply('Parcels ship in 3 days.');
      else reply('I do not know that, sorry.');
    }));
    llm = await startTestApp({
      LLM_BASE_URL: baseUrl,
      LLM_MODEL: 'judge-model',
      LLM_API_KEY: 'sk-test',
    });
  });
  afterAll(async () => {
    await llm?.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('answer and no_answer cases are graded by the LLM judge with its rationale recorded', async () => {
    const { key } = await llm.tenant();
    const ds = await newDataset(key, undefined, llm);
    await addCase(
      key,
      ds,
      { question: 'How long do refunds take?', expected_type: 'answer', expected_answer: 'Refunds take 14 days.' },
      llm,
    );
    await addCase(
      key,
      ds,
      { question: 'When does it ship?', expected_type: 'answer', expected_answer: 'Refunds take 14 days.' },
      llm,
    );
    await addCase(key, ds, { question: 'Meaning of life?', expected_type: 'no_answer' }, llm);
    await addCase(key, ds, { question: 'Tell me about refunds', expected_type: 'no_answer' }, llm);
    const run = await playRun(key, ds, {}, llm);
    expect(run).toMatchObject({ status: 'completed', passed_tests: 2, failed_tests: 2, success_rate: 0.5 });
    const results = await allResults(llm, key, run.id);
    expect(results.map((r) => r.passed)).toEqual([true, false, true, false]);
    expect(results[0]).toMatchObject({
      score: 0.9,
      evaluation: { method: 'llm_judge', rationale: 'Same meaning: about two weeks.', model: 'judge-model' },
      outcome: { answer: 'A refund reaches you in about two weeks.' },
    });
    expect(results[1]?.evaluation.rationale).toBe('It is about something else.');
    expect(results[2]?.outcome.declined).toBe(true);
    expect(judged).toHaveLength(4);
    expect(judged.every((j) => j.model === 'judge-model' && j.authorization === 'Bearer sk-test')).toBe(true);
    // Cases play concurrently, so the judge's requests arrive in any order: find the answer case's.
    expect(judged.some((j) => j.prompt.includes('EXPECTED:\nRefunds take 14 days.'))).toBe(true);
  });

  it('a judge that cannot be reached or answers without a verdict fails the case with the reason, never passes it', async () => {
    const { key } = await llm.tenant();
    const ds = await newDataset(key, undefined, llm);
    await addCase(
      key,
      ds,
      { question: 'Refunds? (the judge is down)', expected_type: 'answer', expected_answer: 'About two weeks.' },
      llm,
    );
    await addCase(
      key,
      ds,
      { question: 'Refunds? (the judge rambles)', expected_type: 'answer', expected_answer: 'About two weeks.' },
      llm,
    );
    const run = await playRun(key, ds, {}, llm);
    expect(run).toMatchObject({ status: 'completed', passed_tests: 0, failed_tests: 2 });
    const [down, rambles] = await allResults(llm, key, run.id);
    expect(down).toMatchObject({
      passed: false,
      evaluation: { method: 'llm_judge', error: 'The LLM judge answered HTTP 503.' },
    });
    expect(rambles).toMatchObject({
      passed: false,
      evaluation: { method: 'llm_judge', error: 'The LLM judge did not answer with a JSON verdict.' },
    });
  });

  it("a case's conversation, while it plays, is no customer's: not listed, 404 to reads, replies and imports, no link target", async () => {
    const { key } = await llm.tenant();
    const call = (method: 'GET' | 'POST', url: string, body?: unknown) => llm.call({ method, url, key, body });
    const customer = await call('POST', '/api/v1/messages', { content: 'How long do refunds take?' });
    expect(customer.status).toBe(200);
    // The turn has ended and been written; the judge holds the verdict, so the case's
    // conversation exists until it is recorded.
    const { run, played, sendVerdict } = await runJudgedLate(key);
    const mark = await llm.database.db
      .selectFrom('simulation_conversations')
      .select('conversation_id')
      .where('run_id', '=', run.body.id)
      .executeTakeFirstOrThrow();
    const simulated = mark.conversation_id;
    const answer = await llm.database.db
      .selectFrom('messages')
      .select('id')
      .where('conversation_id', '=', simulated)
      .where('author', '=', 'agent')
      .executeTakeFirstOrThrow();

    const listed = await call('GET', '/api/v1/conversations?limit=100');
    expect(listed.body.data.map((c: { id: string }) => c.id)).toEqual([customer.body.conversation_id]);
    const byAgent = await call('GET', `/api/v1/conversations?agent_id=${customer.body.agent_id}`);
    expect(byAgent.body.data.map((c: { id: string }) => c.id)).toEqual([customer.body.conversation_id]);
    expectError(await call('GET', `/api/v1/conversations/${simulated}`), 404, 'not_found', 'conversation_id');
    expectError(await call('GET', `/api/v1/conversations/${simulated}/messages`), 404, 'not_found', 'conversation_id');
    expectError(await call('GET', `/api/v1/messages/${answer.id}`), 404, 'not_found', 'message_id');
    expectError(
      await call('POST', `/api/v1/messages/${answer.id}/feedback`, { rating: 'negative' }),
      404,
      'not_found',
      'message_id',
    );
    expectError(
      await call('POST', `/api/v1/messages/${answer.id}/function-results`, { results: [{ call_id: 'c1', output: 1 }] }),
      404,
      'not_found',
      'message_id',
    );
    expectError(await call('POST', `/api/v1/messages/${answer.id}/continue`, {}), 404, 'not_found', 'message_id');
    expectError(
      await call('POST', '/api/v1/messages', { conversation_id: simulated, content: 'Me again' }),
      404,
      'not_found',
      'conversation_id',
    );
    const other = await newDataset(key, undefined, llm);
    expectError(
      await call('POST', `/api/v1/simulation/datasets/${other}/import/conversation/${simulated}`),
      404,
      'not_found',
      'thread_id',
    );
    const task = await call('POST', '/api/v1/tasks', { title: 'Look into this' });
    for (const target of [
      { target_type: 'conversation', target_id: simulated },
      { target_type: 'message', target_id: answer.id },
    ]) {
      expectError(
        await call('POST', `/api/v1/tasks/${task.body.id}/links`, target),
        422,
        'invalid_parameters',
        'target_id',
      );
    }
    expect((await call('GET', `/api/v1/tasks/${task.body.id}/links`)).body.data).toEqual([]);
    // MCP tools run the same operations.
    const mcp = await llm.call({
      method: 'POST',
      url: '/api/v1/mcp',
      key,
      headers: { accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_conversations', arguments: {} } },
    });
    expect(mcp.body.result.structuredContent.data.map((c: { id: string }) => c.id)).toEqual([
      customer.body.conversation_id,
    ]);

    sendVerdict();
    await played;
    // The case played as it would have alone: nothing reached its conversation from outside.
    const [result] = await allResults(llm, key, run.body.id);
    expect(result?.passed).toBe(true);
    expect(result?.outcome.transcript.map((m) => m.author)).toEqual(['customer', 'agent']);
    expect((await call('GET', '/api/v1/conversations')).body.data).toHaveLength(1);
  });

  // PostgreSQL only: a second session holds the case's conversation under the delete. The delete
  // takes the run before the conversation, as recording a case does, or the two would deadlock.
  it.runIf(usingPostgres)(
    'a verdict recorded after the dataset delete took its conversation waits for the delete: 200, nothing is left',
    async () => {
      const { tenantId, key } = await llm.tenant();
      // The turn has ended and been written; the judge holds the verdict.
      const { ds, run, played, sendVerdict } = await runJudgedLate(key);
      await llm.database.db.connection().execute(async (hold) => {
        // The customer's message is held: the delete takes the conversation, then waits for it.
        await sql`begin`.execute(hold);
        await sql`select 1 from messages where tenant_id = ${tenantId} and author = 'customer' for update`.execute(
          hold,
        );
        const deleting = llm.call({ method: 'DELETE', url: `/api/v1/simulation/datasets/${ds}`, key });
        expect(await lockWaiters(hold, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
        // The verdict's record waits for the delete.
        sendVerdict();
        expect(await lockWaiters(hold, QUEUED_BEHIND)).toBe(1);
        await sql`commit`.execute(hold);
        expect((await deleting).status).toBe(200);
      });
      await played;
      expect(await leftBehind(llm, tenantId, run.body.id)).toEqual(NOTHING_LEFT);
    },
  );
});
