// Dashboard analytics: metrics and the daily series computed in SQL from conversations written
// with known timestamps (expected values worked out by hand below), filters, a conversation made
// through the real agent, request validation, tenant isolation and the time limit (500
// export_failed).
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/lib/ids.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const dashboard = (app: TestApp, key: string, body: unknown) =>
  app.call({ method: 'POST', url: '/api/v1/analytics/dashboard', key, body });

type Msg = {
  role: 'user' | 'assistant' | 'system';
  at: string;
  done?: string;
  content?: string;
  hidden?: boolean;
  feedback?: { rating: 'positive' | 'negative'; at: string };
};

/** One conversation with its messages (and feedback on them), at the given instants. */
async function conversation(
  app: TestApp,
  tenantId: string,
  agentId: string,
  at: string,
  messages: Msg[],
  extra: { context?: Record<string, unknown>; ticketAt?: string; gapAt?: string } = {},
) {
  const id = newId();
  const db = app.database.db;
  await db
    .insertInto('conversations')
    .values({
      id,
      tenant_id: tenantId,
      agent_id: agentId,
      context: JSON.stringify(extra.context ?? null),
      created_at: at,
    })
    .execute();
  for (const m of messages) {
    const messageId = newId();
    await db
      .insertInto('messages')
      .values({
        id: messageId,
        tenant_id: tenantId,
        conversation_id: id,
        agent_id: m.role === 'assistant' ? agentId : null,
        role: m.role,
        author: m.role === 'user' ? 'customer' : m.role === 'assistant' ? 'agent' : 'application',
        hidden: m.hidden ?? false,
        content: m.content ?? (m.role === 'assistant' ? 'Here is how.' : 'How do I do this?'),
        status: 'COMPLETED',
        citations: '[]',
        handoff: 'null',
        error: 'null',
        created_at: m.at,
        updated_at: m.done ?? m.at,
      })
      .execute();
    if (m.feedback) {
      await db
        .insertInto('message_feedback')
        .values({
          id: newId(),
          tenant_id: tenantId,
          conversation_id: id,
          message_id: messageId,
          rating: m.feedback.rating,
          created_at: m.feedback.at,
        })
        .execute();
    }
  }
  if (extra.ticketAt) {
    await db
      .insertInto('tickets')
      .values({
        id: newId(),
        tenant_id: tenantId,
        conversation_id: id,
        to_agent_id: agentId,
        reason: 'asked for a human',
        created_at: extra.ticketAt,
        updated_at: extra.ticketAt,
      })
      .execute();
  }
  if (extra.gapAt) await gap(app, tenantId, extra.gapAt, id);
  return id;
}

async function gap(app: TestApp, tenantId: string, at: string, conversationId: string | null) {
  const requestId = newId();
  await app.database.db
    .insertInto('knowledge_update_requests')
    .values({
      id: requestId,
      tenant_id: tenantId,
      question: 'Unanswered?',
      conversation_id: conversationId,
      created_at: at,
      updated_at: at,
    })
    .execute();
  // Its asking, as recordGap writes it: analytics tells unanswered conversations by these.
  await app.database.db
    .insertInto('knowledge_gap_occurrences')
    .values({ tenant_id: tenantId, request_id: requestId, conversation_id: conversationId, created_at: at })
    .execute();
}

async function agent(app: TestApp, tenantId: string, name: string) {
  const id = newId();
  await app.database.db
    .insertInto('agents')
    .values({ id, tenant_id: tenantId, name, handoff_agent_ids: '[]' })
    .execute();
  return id;
}

/**
 * The fixture of March 2024 (report 2024-03-01 … 2024-03-03):
 *  C1 03-01 Alpha {customer, acme}: 2 customer messages; first reply done after 4 s; positive
 *     feedback → resolved.
 *  C2 03-01 Alpha {lead}: reply after 10 s; a handoff ticket → handed off, not resolved.
 *  C3 03-02 Beta {customer, globex}: reply after 20 s; negative feedback → not resolved.
 *  C4 03-03 Beta, no context: reply after 6 s; a knowledge gap → not resolved; a hidden
 *     application message (not a customer message).
 *  C5 02-28 Alpha (before the range): its customer message of 03-02 counts as a message, the
 *     conversation does not.
 *  A knowledge gap of 03-02 without conversation.
 * Another workspace has a conversation, message, feedback and gap on 03-01: never counted.
 */
async function seedMarch(app: TestApp, tenantId: string) {
  const alpha = await agent(app, tenantId, 'Alpha');
  const beta = await agent(app, tenantId, 'Beta');
  await conversation(
    app,
    tenantId,
    alpha,
    '2024-03-01T10:00:00Z',
    [
      { role: 'user', at: '2024-03-01T10:00:00Z' },
      {
        role: 'assistant',
        at: '2024-03-01T10:00:00Z',
        done: '2024-03-01T10:00:04Z',
        feedback: { rating: 'positive', at: '2024-03-01T10:10:00Z' },
      },
      { role: 'user', at: '2024-03-01T10:05:00Z' },
      { role: 'assistant', at: '2024-03-01T10:05:00Z', done: '2024-03-01T10:05:02Z' },
    ],
    { context: { user_type: 'customer', organization: 'acme' } },
  );
  await conversation(
    app,
    tenantId,
    alpha,
    '2024-03-01T12:00:00Z',
    [
      { role: 'user', at: '2024-03-01T12:00:00Z' },
      { role: 'assistant', at: '2024-03-01T12:00:00Z', done: '2024-03-01T12:00:10Z' },
    ],
    { context: { user_type: 'lead' }, ticketAt: '2024-03-01T12:01:00Z' },
  );
  await conversation(
    app,
    tenantId,
    beta,
    '2024-03-02T09:00:00Z',
    [
      { role: 'user', at: '2024-03-02T09:00:00Z' },
      {
        role: 'assistant',
        at: '2024-03-02T09:00:00Z',
        done: '2024-03-02T09:00:20Z',
        feedback: { rating: 'negative', at: '2024-03-02T09:30:00Z' },
      },
    ],
    { context: { user_type: 'customer', organization: 'globex' } },
  );
  await conversation(
    app,
    tenantId,
    beta,
    '2024-03-03T23:30:00Z',
    [
      { role: 'user', at: '2024-03-03T23:30:00Z' },
      { role: 'assistant', at: '2024-03-03T23:30:00Z', done: '2024-03-03T23:30:06Z', content: 'I do not know.' },
      { role: 'system', at: '2024-03-03T23:35:00Z', hidden: true, content: 'page changed' },
    ],
    { gapAt: '2024-03-03T23:31:00Z' },
  );
  await conversation(app, tenantId, alpha, '2024-02-28T10:00:00Z', [
    { role: 'user', at: '2024-02-28T10:00:00Z' },
    { role: 'assistant', at: '2024-02-28T10:00:00Z', done: '2024-02-28T10:00:01Z' },
    { role: 'user', at: '2024-03-02T08:00:00Z' },
  ]);
  await gap(app, tenantId, '2024-03-02T15:00:00Z', null);
}

const MARCH = { report_type: 'custom', start_date: '2024-03-01', end_date: '2024-03-03' };
const zeroDay = (date: string) => ({
  date,
  conversations: 0,
  customer_messages: 0,
  resolved_conversations: 0,
  handed_off_conversations: 0,
  feedback_positive: 0,
  feedback_negative: 0,
  knowledge_gaps_opened: 0,
  median_first_response_seconds: null,
});

describe('dashboard analytics', () => {
  let key: string;
  let tenantId: string;

  beforeAll(async () => {
    ({ key, tenantId } = await t.tenant());
    await seedMarch(t, tenantId);
    // Another workspace, same days: never counted.
    const other = await t.tenant();
    const otherAgent = await agent(t, other.tenantId, 'Alpha');
    await conversation(
      t,
      other.tenantId,
      otherAgent,
      '2024-03-01T11:00:00Z',
      [
        { role: 'user', at: '2024-03-01T11:00:00Z' },
        {
          role: 'assistant',
          at: '2024-03-01T11:00:00Z',
          done: '2024-03-01T11:00:30Z',
          feedback: { rating: 'positive', at: '2024-03-01T11:01:00Z' },
        },
      ],
      { gapAt: '2024-03-01T11:02:00Z', ticketAt: '2024-03-01T11:03:00Z' },
    );
  });

  it('computes the metrics and a zero-filled daily series from the conversations of the range', async () => {
    const report = await dashboard(t, key, MARCH);
    expect(report.status).toBe(200);
    expect(report.body).toEqual({
      object: 'analytics_report',
      report_type: 'custom',
      start_date: '2024-03-01',
      end_date: '2024-03-03',
      filters: { user_type: null, agent_name: null, organization: null, tab: null },
      metrics: {
        conversations: 4,
        customer_messages: 6, // C1 2, C2 1, C3 1, C4 1, C5's message of 03-02
        resolved_conversations: 1, // C1
        resolution_rate: 0.25,
        handed_off_conversations: 1, // C2
        handoff_rate: 0.25,
        feedback_positive: 1,
        feedback_negative: 1,
        knowledge_gaps_opened: 2, // C4's and the one without conversation
        median_first_response_seconds: 8, // median of 4, 6, 10, 20
      },
      series: [
        {
          date: '2024-03-01',
          conversations: 2,
          customer_messages: 3,
          resolved_conversations: 1,
          handed_off_conversations: 1,
          feedback_positive: 1,
          feedback_negative: 0,
          knowledge_gaps_opened: 0,
          median_first_response_seconds: 7, // 4 and 10
        },
        {
          date: '2024-03-02',
          conversations: 1,
          customer_messages: 2,
          resolved_conversations: 0,
          handed_off_conversations: 0,
          feedback_positive: 0,
          feedback_negative: 1,
          knowledge_gaps_opened: 1,
          median_first_response_seconds: 20,
        },
        {
          date: '2024-03-03',
          conversations: 1,
          customer_messages: 1,
          resolved_conversations: 0,
          handed_off_conversations: 0,
          feedback_positive: 0,
          feedback_negative: 0,
          knowledge_gaps_opened: 1,
          median_first_response_seconds: 6,
        },
      ],
      // These conversations were written without turns, so no trace: no model usage.
      usage: {
        turns: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost: null,
        series: ['2024-03-01', '2024-03-02', '2024-03-03'].map((date) => ({
          date,
          turns: 0,
          input_tokens: 0,
          output_tokens: 0,
          cost: null,
        })),
        by_agent: [],
      },
    });
  });

  it('agent_name keeps the conversations with that agent (case-insensitive); gaps without conversation drop out', async () => {
    const report = await dashboard(t, key, { ...MARCH, agent_name: 'alpha' });
    expect(report.body.filters).toEqual({ user_type: null, agent_name: 'alpha', organization: null, tab: null });
    expect(report.body.metrics).toEqual({
      conversations: 2,
      customer_messages: 4, // C1 2, C2 1, C5 1
      resolved_conversations: 1,
      resolution_rate: 0.5,
      handed_off_conversations: 1,
      handoff_rate: 0.5,
      feedback_positive: 1,
      feedback_negative: 0,
      knowledge_gaps_opened: 0,
      median_first_response_seconds: 7,
    });
  });

  it("user_type and organization match the conversation's context", async () => {
    const customers = await dashboard(t, key, { ...MARCH, user_type: 'customer' });
    expect(customers.body.metrics).toMatchObject({
      conversations: 2, // C1, C3
      customer_messages: 3,
      resolved_conversations: 1,
      handed_off_conversations: 0,
      feedback_positive: 1,
      feedback_negative: 1,
      knowledge_gaps_opened: 0,
      median_first_response_seconds: 12, // 4 and 20
    });
    const acme = await dashboard(t, key, { ...MARCH, organization: 'acme', user_type: 'customer' });
    expect(acme.body.metrics).toMatchObject({ conversations: 1, customer_messages: 2, resolution_rate: 1 });
  });

  it('unknown filter values give zeros (rates and median null), not errors; tab is only echoed', async () => {
    const report = await dashboard(t, key, { ...MARCH, agent_name: 'Nobody', tab: 'overview' });
    expect(report.status).toBe(200);
    expect(report.body.metrics).toEqual({
      conversations: 0,
      customer_messages: 0,
      resolved_conversations: 0,
      resolution_rate: null,
      handed_off_conversations: 0,
      handoff_rate: null,
      feedback_positive: 0,
      feedback_negative: 0,
      knowledge_gaps_opened: 0,
      median_first_response_seconds: null,
    });
    expect(report.body.series).toEqual([zeroDay('2024-03-01'), zeroDay('2024-03-02'), zeroDay('2024-03-03')]);
    const tabbed = await dashboard(t, key, { ...MARCH, tab: 'overview' });
    const plain = await dashboard(t, key, MARCH);
    expect(tabbed.body.filters.tab).toBe('overview');
    expect(tabbed.body.metrics).toEqual(plain.body.metrics);
  });

  it('last_7_days and last_30_days end today (UTC) and count what falls inside', async () => {
    const { key: k, tenantId: tid } = await t.tenant();
    const a = await agent(t, tid, 'A');
    const ago = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
    await conversation(t, tid, a, ago(1), [{ role: 'user', at: ago(1) }]);
    await conversation(t, tid, a, ago(10), [{ role: 'user', at: ago(10) }]);
    await conversation(t, tid, a, ago(100), [{ role: 'user', at: ago(100) }]);
    const today = new Date().toISOString().slice(0, 10);
    const week = await dashboard(t, k, { report_type: 'last_7_days' });
    expect(week.body).toMatchObject({ report_type: 'last_7_days', end_date: today });
    expect(week.body.start_date).toBe(
      new Date(Date.parse(`${today}T00:00:00Z`) - 6 * 86_400_000).toISOString().slice(0, 10),
    );
    expect(week.body.series).toHaveLength(7);
    expect(week.body.metrics).toMatchObject({ conversations: 1, customer_messages: 1 });
    const month = await dashboard(t, k, { report_type: 'last_30_days' });
    expect(month.body.series).toHaveLength(30);
    expect(month.body.metrics.conversations).toBe(2);
    const quarter = await dashboard(t, k, { report_type: 'last_90_days' });
    expect(quarter.body.series).toHaveLength(90);
    expect(quarter.body.metrics.conversations).toBe(2);
  });

  it('counts a conversation made through the real agent (its unanswered question is a knowledge gap)', async () => {
    const { key: k } = await t.tenant();
    const sent = await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key: k,
      body: { content: 'How do I reset my password?' },
    });
    expect(sent.status).toBe(200);
    const report = await dashboard(t, k, { report_type: 'last_7_days' });
    expect(report.body.metrics).toMatchObject({
      conversations: 1,
      customer_messages: 1,
      resolved_conversations: 0,
      resolution_rate: 0,
      knowledge_gaps_opened: 1,
    });
    expect(report.body.metrics.median_first_response_seconds).toBeGreaterThanOrEqual(0);
    const today = report.body.series.at(-1);
    expect(today).toMatchObject({ date: new Date().toISOString().slice(0, 10), conversations: 1 });
  });

  it('a second conversation asking the same unanswered question is not resolved either (one gap, two askings)', async () => {
    const { key: k } = await t.tenant();
    for (let i = 0; i < 2; i++) {
      const sent = await t.call({
        method: 'POST',
        url: '/api/v1/messages',
        key: k,
        body: { content: 'Do you sell gift vouchers?' },
      });
      expect(sent.status).toBe(200);
    }
    const gaps = await t.call({ url: '/api/v1/knowledge-update-requests', key: k });
    expect(gaps.body.data).toHaveLength(1);
    expect(gaps.body.data[0].occurrences).toBe(2);
    const report = await dashboard(t, k, { report_type: 'last_7_days' });
    expect(report.body.metrics).toMatchObject({
      conversations: 2,
      resolved_conversations: 0,
      knowledge_gaps_opened: 1,
    });
  });

  it('leaves out a conversation a simulation case is playing: its messages, feedback, gaps and handoff', async () => {
    const { tenantId, key: k } = await t.tenant();
    const agentId = await agent(t, tenantId, 'Solo');
    const reply: Msg = {
      role: 'assistant',
      at: '2024-03-01T10:00:01Z',
      done: '2024-03-01T10:00:05Z',
      feedback: { rating: 'negative', at: '2024-03-01T10:01:00Z' },
    };
    const playing = await conversation(
      t,
      tenantId,
      agentId,
      '2024-03-01T10:00:00Z',
      [{ role: 'user', at: '2024-03-01T10:00:00Z' }, reply],
      { gapAt: '2024-03-01T10:02:00Z', ticketAt: '2024-03-01T10:03:00Z' },
    );
    await conversation(t, tenantId, agentId, '2024-03-01T11:00:00Z', [{ role: 'user', at: '2024-03-01T11:00:00Z' }]);
    const before = await dashboard(t, k, MARCH);
    expect(before.body.metrics).toMatchObject({
      conversations: 2,
      customer_messages: 2,
      handed_off_conversations: 1,
      feedback_negative: 1,
      knowledge_gaps_opened: 1,
      median_first_response_seconds: 5,
    });
    // The run marks the conversation as it starts the case (src/domain/simulations/runs.ts).
    await t.database.db
      .insertInto('simulation_conversations')
      .values({ conversation_id: playing, tenant_id: tenantId, run_id: newId(), test_case_id: newId() })
      .execute();
    const during = await dashboard(t, k, MARCH);
    expect(during.body.metrics).toEqual({
      conversations: 1,
      customer_messages: 1,
      resolved_conversations: 0,
      resolution_rate: 0,
      handed_off_conversations: 0,
      handoff_rate: 0,
      feedback_positive: 0,
      feedback_negative: 0,
      knowledge_gaps_opened: 0,
      median_first_response_seconds: null,
    });
  });

  it('validates the request: custom needs both dates, order, at most 366 days, known report types', async () => {
    expectError(
      await dashboard(t, key, { report_type: 'custom', end_date: '2024-03-03' }),
      422,
      'missing_required_parameter',
      'start_date',
    );
    expectError(
      await dashboard(t, key, { report_type: 'custom', start_date: '2024-03-01' }),
      422,
      'missing_required_parameter',
      'end_date',
    );
    expectError(
      await dashboard(t, key, { report_type: 'custom', start_date: '2024-03-03', end_date: '2024-03-01' }),
      422,
      'validation_error',
      'end_date',
    );
    // 2024 is a leap year: Jan 1 to Dec 31 is 366 days (allowed), to Jan 1 2025 is 367.
    const leapYear = await dashboard(t, key, {
      report_type: 'custom',
      start_date: '2024-01-01',
      end_date: '2024-12-31',
    });
    expect(leapYear.status).toBe(200);
    expect(leapYear.body.series).toHaveLength(366);
    expectError(
      await dashboard(t, key, { report_type: 'custom', start_date: '2024-01-01', end_date: '2025-01-01' }),
      422,
      'validation_error',
      'end_date',
    );
    expectError(await dashboard(t, key, {}), 422, 'missing_required_parameter', 'report_type');
    expectError(await dashboard(t, key, { report_type: 'last_year' }), 422, 'validation_error', 'report_type');
    expectError(
      await dashboard(t, key, { report_type: 'last_7_days', start_date: '2024-03-01' }),
      422,
      'validation_error',
      'start_date',
    );
    expectError(
      await dashboard(t, key, { report_type: 'custom', start_date: '2024-02-30', end_date: '2024-03-01' }),
      422,
      'validation_error',
      'start_date',
    );
    // There is no year 0 (PostgreSQL refuses it too).
    expectError(
      await dashboard(t, key, { report_type: 'custom', start_date: '0000-12-31', end_date: '0001-01-01' }),
      422,
      'validation_error',
      'start_date',
    );
    expectError(
      await dashboard(t, key, { report_type: 'custom', start_date: '03/01/2024', end_date: '2024-03-01' }),
      422,
      'validation_error',
      'start_date',
    );
    expectError(await dashboard(t, key, { report_type: 'last_7_days', colour: 'red' }), 422, 'validation_error');
  });

  it('is a read: analytics:read suffices, a key without an analytics scope gets 403', async () => {
    const reader = await t.key(tenantId, ['analytics:read']);
    expect((await dashboard(t, reader, MARCH)).status).toBe(200);
    const other = await t.key(tenantId, ['coverage:read']);
    expectError(await dashboard(t, other, MARCH), 403, 'insufficient_scope');
  });
});

describe('dashboard analytics time limit', () => {
  let slow: TestApp;

  beforeAll(async () => {
    // Long enough to begin (a report without a connection by then answers 503), short of the report.
    slow = await startTestApp({ ANALYTICS_TIMEOUT_MS: '100' });
  });
  afterAll(() => slow.close());

  it('a report that outruns ANALYTICS_TIMEOUT_MS answers 500 export_failed with its advice, not a hang', async () => {
    const { key, tenantId } = await slow.tenant();
    const agentId = await agent(slow, tenantId, 'Bulk');
    // 20,000 conversations of the last 90 days, each with a customer message and a reply.
    await sql`
      insert into conversations (id, tenant_id, agent_id, created_at, updated_at)
      select gen_random_uuid(), ${tenantId}, ${agentId}, now() - (g % 90) * interval '1 day', now()
      from generate_series(1, 20000) as g
    `.execute(slow.database.db);
    await sql`
      insert into messages (id, tenant_id, conversation_id, role, author, content, status, created_at, updated_at)
      select gen_random_uuid(), c.tenant_id, c.id, r.role, r.author, 'text', 'COMPLETED', c.created_at,
             c.created_at + interval '3 seconds'
      from conversations c cross join (values ('user', 'customer'), ('assistant', 'agent')) as r(role, author)
      where c.tenant_id = ${tenantId}
    `.execute(slow.database.db);
    const started = Date.now();
    const report = await dashboard(slow, key, { report_type: 'last_90_days' });
    const error = expectError(report, 500, 'export_failed');
    expect(error.type).toBe('api_error');
    expect(error.message).toMatch(/use a smaller date range or retry later/);
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});
