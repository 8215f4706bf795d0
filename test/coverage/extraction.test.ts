// Question extraction: customers' questions are taken from conversations (their own messages,
// question-like sentences), near-duplicates are dropped (of each other and of the referential),
// each is filed under the closest existing domain or `uncategorized`; progress is live and is
// observed mid-run by stepping the job queue one batch (50 conversations) at a time.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COVERAGE_EXTRACTION_JOB } from '../../src/domain/coverage/extraction.js';
import { newId } from '../../src/lib/ids.js';
import { expectError, lockWaiters, QUEUED_BEHIND, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const send = (key: string, content: string) =>
  t.call({ method: 'POST', url: '/api/v1/messages', key, body: { content } });

/** Conversations written straight to the database: one customer message each (and an agent reply). */
async function seedConversations(tenantId: string, agentId: string, contents: string[]) {
  const conversations = contents.map(() => ({ id: newId(), tenant_id: tenantId, agent_id: agentId, context: 'null' }));
  await t.database.db.insertInto('conversations').values(conversations).execute();
  const messages = contents.flatMap((content, i) => {
    const conversation_id = conversations[i]?.id as string;
    const base = { tenant_id: tenantId, conversation_id, citations: '[]', handoff: 'null', error: 'null' };
    return [
      { ...base, id: newId(), role: 'user' as const, author: 'customer' as const, content, status: 'COMPLETED' },
      {
        ...base,
        id: newId(),
        role: 'assistant' as const,
        author: 'agent' as const,
        agent_id: agentId,
        // The agent's questions are not the customer's: never extracted.
        content: 'Could you tell me more about your account settings?',
        status: 'COMPLETED',
      },
      {
        ...base,
        id: newId(),
        role: 'system' as const,
        author: 'application' as const,
        hidden: true,
        content: 'Is the customer on the premium plan for billing?',
        status: 'COMPLETED',
      },
    ];
  });
  await t.database.db.insertInto('messages').values(messages).execute();
}

const status = async (key: string) => (await t.call({ url: '/api/v1/coverage/extract/status', key })).body;

describe('question extraction', () => {
  it('extracts, deduplicates and files questions, with progress observed mid-run (0 < processed < total)', async () => {
    const { key, tenantId } = await t.tenant();
    expect(await status(key)).toMatchObject({
      object: 'question_extraction',
      id: null,
      status: 'never_run',
      percent: 0,
    });

    // Two conversations through the real agent.
    expect((await send(key, 'Hello! How do I reset my password?')).status).toBe(200);
    expect((await send(key, 'Can I get a refund for my invoice? Thanks.')).status).toBe(200);
    const agent = await t.database.db
      .selectFrom('agents')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .executeTakeFirstOrThrow();
    // 60 more written directly: 30 near-duplicates of the first question, 20 of one new
    // question, 10 of another (whose first sentence is a statement, not a question).
    await seedConversations(tenantId, agent.id, [
      ...Array.from({ length: 30 }, () => 'how do i reset my PASSWORD?'),
      ...Array.from({ length: 20 }, () => 'Is it possible to change the email address on my account?'),
      ...Array.from({ length: 10 }, () => 'My parcel never arrived. Where is my order?'),
    ]);
    // A conversation of another workspace is never read.
    const other = await t.tenant();
    await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key: other.key,
      body: { content: 'How do I cancel my subscription?' },
    });

    const created = await t.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: { name: 'FAQ' } });
    const referentialId = created.body.id as string;
    await t.call({
      method: 'POST',
      url: `/api/v1/coverage/referentials/${referentialId}/questions`,
      key,
      body: {
        questions: [
          { question: 'How do I change my email address?', domain: 'account' },
          { question: 'Where can I find my invoices?', domain: 'billing' },
        ],
      },
    });
    await t.jobs.runUntilIdle(); // nothing else is due when the extraction starts

    const started = await t.call({
      method: 'POST',
      url: '/api/v1/coverage/extract',
      key,
      body: { referential_id: referentialId },
    });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({
      object: 'question_extraction',
      referential_id: referentialId,
      status: 'queued',
      total_conversations: 62,
      processed_conversations: 0,
      percent: 0,
      started_at: null,
    });
    // One run at a time.
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/extract', key, body: { referential_id: referentialId } }),
      409,
      'conflict',
    );

    // One step of the queue: the first batch of 50 conversations.
    const claim = await t.jobs.claim();
    expect(claim?.job.kind).toBe('coverage.extract');
    if (claim) await t.jobs.run(claim);
    const midway = await status(key);
    expect(midway).toMatchObject({
      id: started.body.id,
      status: 'running',
      total_conversations: 62,
      finished_at: null,
    });
    expect(midway.processed_conversations).toBeGreaterThan(0);
    expect(midway.processed_conversations).toBeLessThan(midway.total_conversations);
    expect(midway.processed_conversations).toBe(50);
    expect(midway.percent).toBe(80.6);
    expect(midway.started_at).not.toBeNull();

    await t.jobs.runUntilIdle();
    const done = await status(key);
    expect(done).toMatchObject({
      status: 'completed',
      total_conversations: 62,
      processed_conversations: 62,
      // 1 + 1 from the agent's conversations, 30 + 20 + 10 seeded.
      questions_found: 62,
      // reset password, refund for invoice, change e-mail on account, where is my order.
      questions_added: 4,
      percent: 100,
      error: null,
    });
    expect(done.finished_at).not.toBeNull();

    const list = await t.call({ url: `/api/v1/coverage/referentials/${referentialId}/questions`, key });
    const extracted = list.body.data
      .filter((q: { origin: string }) => q.origin === 'extracted')
      .map((q: { question: string; domain: string }) => [q.question.toLowerCase(), q.domain])
      .sort();
    expect(extracted).toEqual(
      [
        ['can i get a refund for my invoice?', 'billing'],
        ['how do i reset my password?', 'uncategorized'],
        ['is it possible to change the email address on my account?', 'account'],
        ['where is my order?', 'uncategorized'],
      ].sort(),
    );
    expect(list.body.domains).toEqual([
      { domain: 'account', question_count: 2 },
      { domain: 'billing', question_count: 2 },
      { domain: 'uncategorized', question_count: 2 },
    ]);
    for (const q of list.body.data.filter((q: { origin: string }) => q.origin === 'extracted')) {
      expect(q.conversation_id).not.toBeNull();
    }

    // A second run finds the same questions and adds none: they are near-duplicates of the referential's.
    await t.call({ method: 'POST', url: '/api/v1/coverage/extract', key, body: { referential_id: referentialId } });
    await t.jobs.runUntilIdle();
    expect(await status(key)).toMatchObject({ status: 'completed', questions_found: 62, questions_added: 0 });

    // The other workspace's status is its own.
    expect(await status(other.key)).toMatchObject({ status: 'never_run', id: null });
  });

  it('a referential_id naming nothing in this workspace is 422 invalid_parameters', async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const theirs = await t.call({
      method: 'POST',
      url: '/api/v1/coverage/referentials',
      key: other.key,
      body: { name: 'x' },
    });
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/extract', key, body: { referential_id: theirs.body.id } }),
      422,
      'invalid_parameters',
      'referential_id',
    );
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/extract', key, body: { referential_id: 'nope' } }),
      422,
      'validation_error',
      'referential_id',
    );
  });

  it("leaves out a simulation run's conversations: they are not the customers'", async () => {
    const { key, tenantId } = await t.tenant();
    expect((await send(key, 'How do I export my invoices as PDF?')).status).toBe(200);
    const agent = await t.database.db
      .selectFrom('agents')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .executeTakeFirstOrThrow();
    await seedConversations(tenantId, agent.id, ['Is the zebra widget warranty two years long?']);
    // The seeded conversation is marked as a simulation's, as a run marks the ones it holds.
    const seeded = await t.database.db
      .selectFrom('messages')
      .select('conversation_id')
      .where('tenant_id', '=', tenantId)
      .where('content', '=', 'Is the zebra widget warranty two years long?')
      .executeTakeFirstOrThrow();
    await t.database.db
      .insertInto('simulation_conversations')
      .values({ conversation_id: seeded.conversation_id, tenant_id: tenantId, run_id: newId(), test_case_id: newId() })
      .execute();
    const created = await t.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: { name: 'R' } });
    await t.call({ method: 'POST', url: '/api/v1/coverage/extract', key, body: { referential_id: created.body.id } });
    await t.jobs.runUntilIdle();
    expect(await status(key)).toMatchObject({
      status: 'completed',
      total_conversations: 1,
      processed_conversations: 1,
    });
    const list = await t.call({ url: `/api/v1/coverage/referentials/${created.body.id}/questions?limit=100`, key });
    expect(list.body.data.map((q: { question: string }) => q.question)).toEqual([
      'How do I export my invoices as PDF?',
    ]);
  });

  it('a workspace without conversations completes at once with 0 of 0 and 100 percent', async () => {
    const { key } = await t.tenant();
    const created = await t.call({
      method: 'POST',
      url: '/api/v1/coverage/referentials',
      key,
      body: { name: 'empty' },
    });
    await t.call({ method: 'POST', url: '/api/v1/coverage/extract', key, body: { referential_id: created.body.id } });
    await t.jobs.runUntilIdle();
    expect(await status(key)).toMatchObject({
      status: 'completed',
      total_conversations: 0,
      processed_conversations: 0,
      questions_found: 0,
      questions_added: 0,
      percent: 100,
    });
  });

  // PostgreSQL only: PGlite's one session runs the delete and the batch one after the other.
  it.runIf(usingPostgres)(
    'deleting the referential while a batch is about to run: no deadlock; the delete answers 200 and the batch ends quietly',
    async () => {
      const { key, tenantId } = await t.tenant();
      expect((await send(key, 'How do I reset my password?')).status).toBe(200);
      const created = await t.call({
        method: 'POST',
        url: '/api/v1/coverage/referentials',
        key,
        body: { name: 'Gone' },
      });
      const referentialId = created.body.id as string;
      expect(
        (
          await t.call({
            method: 'POST',
            url: '/api/v1/coverage/extract',
            key,
            body: { referential_id: referentialId },
          })
        ).status,
      ).toBe(202);
      let batch: Promise<void> | undefined;
      const deleted = await t.database.db.connection().execute(async (hold) => {
        // The referential is held while its delete queues for it, then the batch queues behind
        // the delete: the delete goes first, and takes the run the batch may hold.
        await sql`begin`.execute(hold);
        await sql`select 1 from coverage_referentials where id = ${referentialId} for no key update`.execute(hold);
        const deleting = t.call({ method: 'DELETE', url: `/api/v1/coverage/referentials/${referentialId}`, key });
        expect(await lockWaiters(hold, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
        batch = t.jobs.runUntilIdle();
        expect(await lockWaiters(hold, QUEUED_BEHIND)).toBe(1);
        await sql`commit`.execute(hold);
        return deleting;
      });
      expect(deleted.status, deleted.text).toBe(200);
      await batch;
      const jobs = await t.database.db
        .selectFrom('jobs')
        .select(['status', 'last_error'])
        .where('tenant_id', '=', tenantId)
        .where('kind', '=', COVERAGE_EXTRACTION_JOB)
        .execute();
      expect(jobs).toEqual([{ status: 'succeeded', last_error: null }]);
    },
  );
});
