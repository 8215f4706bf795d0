// Knowledge coverage: referentials and questions, domain rename and merge (spec rule 6),
// evaluation runs over the agent's retrieval with hand-computed expected coverage, the LLM judge
// against a scripted chat-completions server, and tenant isolation.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlmJudge } from '../../src/domain/coverage/judge.js';
import { RELEVANT_RANK } from '../../src/domain/knowledge/search.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

async function referential(key: string, name: string) {
  const created = await t.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: { name } });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

const addQuestions = (key: string, id: string, questions: unknown) =>
  t.call({ method: 'POST', url: `/api/v1/coverage/referentials/${id}/questions`, key, body: { questions } });

const rename = (key: string, id: string, body: unknown) =>
  t.call({ method: 'PUT', url: `/api/v1/coverage/referentials/${id}/domains/rename`, key, body });

describe('referentials and questions', () => {
  it('creates a referential (201), refuses a taken name (409 conflict, param name), lists and gets it', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'Support FAQ');
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: { name: 'Support FAQ' } }),
      409,
      'conflict',
      'name',
    );
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: {} }),
      422,
      'missing_required_parameter',
      'name',
    );
    const list = await t.call({ url: '/api/v1/coverage/referentials', key });
    expect(list.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(list.body.data.map((r: { id: string }) => r.id)).toEqual([id]);
    const got = await t.call({ url: `/api/v1/coverage/referentials/${id}`, key });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      id,
      object: 'coverage_referential',
      name: 'Support FAQ',
      question_count: 0,
      domain_count: 0,
    });
    expectError(await t.call({ url: '/api/v1/coverage/referentials/not-a-uuid', key }), 404, 'not_found');
  });

  it('adds questions in batches of 1 to 100 (empty_items, too_many_items, missing domain)', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'r');
    const added = await addQuestions(key, id, [
      { question: 'How do I reset my password?', domain: 'account' },
      { question: '  Where is my   invoice? ', domain: ' billing ' },
    ]);
    expect(added.status).toBe(201);
    expect(added.body.data.map((q: { question: string; domain: string }) => [q.question, q.domain])).toEqual([
      ['How do I reset my password?', 'account'],
      ['Where is my invoice?', 'billing'],
    ]);
    expect(added.body.data[0]).toMatchObject({ object: 'coverage_question', referential_id: id, origin: 'manual' });

    expectError(await addQuestions(key, id, []), 422, 'empty_items', 'questions');
    const tooMany = Array.from({ length: 101 }, (_, i) => ({ question: `Question ${i}?`, domain: 'd' }));
    expectError(await addQuestions(key, id, tooMany), 422, 'too_many_items', 'questions');
    expectError(
      await addQuestions(key, id, [{ question: 'No domain?' }]),
      422,
      'missing_required_parameter',
      'questions[0].domain',
    );
    expectError(
      await addQuestions(key, id, [{ question: 'Blank domain?', domain: '   ' }]),
      422,
      'validation_error',
      'questions[0].domain',
    );
    expectError(
      await addQuestions(key, '0190f7a6-0000-7000-8000-000000000000', [{ question: 'q?', domain: 'd' }]),
      404,
      'not_found',
    );
    const got = await t.call({ url: `/api/v1/coverage/referentials/${id}`, key });
    expect(got.body).toMatchObject({ question_count: 2, domain_count: 2 });
  });

  it('lists questions page by page with their ids, plus every domain with its question count', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'r');
    await addQuestions(key, id, [
      { question: 'q1?', domain: 'billing' },
      { question: 'q2?', domain: 'account' },
      { question: 'q3?', domain: 'billing' },
    ]);
    const first = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions?limit=2`, key });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ object: 'list', has_more: true, referential_id: id });
    expect(first.body.data.map((q: { question: string }) => q.question)).toEqual(['q3?', 'q2?']);
    expect(first.body.data.every((q: { id: string }) => /^[0-9a-f-]{36}$/.test(q.id))).toBe(true);
    expect(first.body.domains).toEqual([
      { domain: 'account', question_count: 1 },
      { domain: 'billing', question_count: 2 },
    ]);
    const second = await t.call({
      url: `/api/v1/coverage/referentials/${id}/questions?limit=2&cursor=${first.body.next_cursor}`,
      key,
    });
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.body.data.map((q: { question: string }) => q.question)).toEqual(['q1?']);
    const billing = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions?domain=billing`, key });
    expect(billing.body.data.map((q: { question: string }) => q.question)).toEqual(['q3?', 'q1?']);
    // The filter is read as domains are stored: whitespace collapsed and trimmed.
    const spaced = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions?domain=%20billing%20`, key });
    expect(spaced.body.data.map((q: { question: string }) => q.question)).toEqual(['q3?', 'q1?']);
  });

  it('renames a domain across every question of the referential and answers how many changed', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'r');
    const other = await referential(key, 'other');
    await addQuestions(key, id, [
      { question: 'Can I pay by card?', domain: 'billing' },
      { question: 'Where is my invoice?', domain: 'billing' },
      { question: 'How do I log in?', domain: 'account' },
    ]);
    await addQuestions(key, other, [{ question: 'Refunds?', domain: 'billing' }]);

    const renamed = await rename(key, id, { old_domain: 'billing', new_domain: 'payments' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({
      object: 'domain_rename',
      referential_id: id,
      old_domain: 'billing',
      new_domain: 'payments',
      renamed_count: 2,
      merged: false,
    });
    const list = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions`, key });
    expect(list.body.domains).toEqual([
      { domain: 'account', question_count: 1 },
      { domain: 'payments', question_count: 2 },
    ]);
    // Another referential's domain of the same name is untouched.
    const untouched = await t.call({ url: `/api/v1/coverage/referentials/${other}/questions`, key });
    expect(untouched.body.domains).toEqual([{ domain: 'billing', question_count: 1 }]);
  });

  it('renaming onto an existing domain merges the two', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'r');
    await addQuestions(key, id, [
      { question: 'Can I pay by card?', domain: 'payments' },
      { question: 'Where is my invoice?', domain: 'billing' },
      { question: 'Do you refund?', domain: 'billing' },
    ]);
    const merged = await rename(key, id, { old_domain: 'payments', new_domain: 'billing' });
    expect(merged.body).toMatchObject({ renamed_count: 1, merged: true });
    const list = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions`, key });
    expect(list.body.domains).toEqual([{ domain: 'billing', question_count: 3 }]);
  });

  it('an unknown old_domain is 422 invalid_parameters (param old_domain) and changes nothing', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'r');
    await addQuestions(key, id, [{ question: 'Where is my invoice?', domain: 'billing' }]);
    expectError(
      await rename(key, id, { old_domain: 'Billing', new_domain: 'x' }),
      422,
      'invalid_parameters',
      'old_domain',
    );
    expectError(await rename(key, id, { old_domain: 'billing' }), 422, 'missing_required_parameter', 'new_domain');
    expectError(
      await rename(key, id, { old_domain: 'billing', new_domain: 'billing' }),
      422,
      'validation_error',
      'new_domain',
    );
    const list = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions`, key });
    expect(list.body.domains).toEqual([{ domain: 'billing', question_count: 1 }]);
  });

  it("another tenant's key gets 404 on every referential route, and a read key cannot write", async () => {
    const { key, tenantId } = await t.tenant();
    const id = await referential(key, 'private');
    await addQuestions(key, id, [{ question: 'Secret?', domain: 'internal' }]);
    const { key: stranger } = await t.tenant();
    expectError(await t.call({ url: `/api/v1/coverage/referentials/${id}`, key: stranger }), 404, 'not_found');
    expectError(
      await t.call({ url: `/api/v1/coverage/referentials/${id}/questions`, key: stranger }),
      404,
      'not_found',
    );
    expectError(await rename(stranger, id, { old_domain: 'internal', new_domain: 'x' }), 404, 'not_found');
    expectError(await addQuestions(stranger, id, [{ question: 'q?', domain: 'd' }]), 404, 'not_found');
    expect((await t.call({ url: '/api/v1/coverage/referentials', key: stranger })).body.data).toEqual([]);
    const reader = await t.key(tenantId, ['coverage:read']);
    expect((await t.call({ url: `/api/v1/coverage/referentials/${id}`, key: reader })).status).toBe(200);
    expectError(await rename(reader, id, { old_domain: 'internal', new_domain: 'x' }), 403, 'insufficient_scope');
    const list = await t.call({ url: `/api/v1/coverage/referentials/${id}/questions`, key });
    expect(list.body.domains).toEqual([{ domain: 'internal', question_count: 1 }]);
  });

  it('deletes a referential with its questions (then 404)', async () => {
    const { key } = await t.tenant();
    const id = await referential(key, 'gone');
    const deleted = await t.call({ method: 'DELETE', url: `/api/v1/coverage/referentials/${id}`, key });
    expect(deleted.body).toEqual({ id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `/api/v1/coverage/referentials/${id}`, key }), 404, 'not_found');
  });
});

// Two help articles; the reference questions are chosen so the expected coverage follows from
// the retrieval rule (most of a question's words in a document, above the relevance threshold;
// no shared word, no passage): covered are exactly the password and the refund questions.
const DOCUMENTS = [
  {
    title: 'Reset your password',
    content: 'To reset your password, open Settings, choose Security and follow the link we e-mail you.',
  },
  { title: 'Refund policy', content: 'Refunds are issued within 14 days to the card used for the purchase.' },
];
const QUESTIONS = [
  { question: 'How do I reset my password?', domain: 'account' }, // covered
  { question: 'How do I delete my profile?', domain: 'account' },
  { question: 'What is your refund policy?', domain: 'billing' }, // covered
  { question: 'Do you accept bitcoin?', domain: 'billing' },
  { question: 'Where can I download an invoice?', domain: 'billing' },
  { question: 'How long does international shipping take?', domain: 'shipping' },
];

async function seedKnowledge(app: TestApp, key: string) {
  for (const document of DOCUMENTS) {
    const created = await app.call({ method: 'POST', url: '/api/v1/documents', key, body: document });
    expect(created.status).toBe(201);
  }
  const created = await app.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: { name: 'FAQ' } });
  const id = created.body.id as string;
  const added = await app.call({
    method: 'POST',
    url: `/api/v1/coverage/referentials/${id}/questions`,
    key,
    body: { questions: QUESTIONS },
  });
  expect(added.status).toBe(201);
  return id;
}

describe('coverage evaluations', () => {
  it('before any completed evaluation, GET /coverage answers 200 with has_evaluation false and an empty list', async () => {
    const { key } = await t.tenant();
    const coverage = await t.call({ url: '/api/v1/coverage', key });
    expect(coverage.status).toBe(200);
    expect(coverage.body).toEqual({
      object: 'coverage',
      has_evaluation: false,
      evaluation_id: null,
      referential_id: null,
      completed_at: null,
      method: null,
      domains: [],
      overall: null,
    });
  });

  it("puts each question to the agent's retrieval: covered when the knowledge answers it (202, queued, then per-domain results)", async () => {
    const { key } = await t.tenant();
    // Another workspace's article answers the bitcoin question: it must not count here.
    const { key: otherKey } = await t.tenant();
    await t.call({
      method: 'POST',
      url: '/api/v1/documents',
      key: otherKey,
      body: { title: 'We accept bitcoin', content: 'Bitcoin payments are accepted at checkout.' },
    });
    const id = await seedKnowledge(t, key);

    const started = await t.call({
      method: 'POST',
      url: '/api/v1/coverage/evaluations',
      key,
      body: { referential_id: id },
    });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({
      object: 'coverage_evaluation',
      referential_id: id,
      status: 'queued',
      method: 'rank_threshold',
      threshold: RELEVANT_RANK,
      total: 6,
      processed: 0,
      percentage: null,
      domains: [],
    });
    const queued = await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
    expect(queued.body.status).toBe('queued');
    // The GET /coverage of a workspace whose only run is still queued says there is none yet.
    expect((await t.call({ url: '/api/v1/coverage', key })).body.has_evaluation).toBe(false);

    await t.jobs.runUntilIdle();

    const done = await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
    expect(done.body).toMatchObject({ status: 'completed', processed: 6, covered: 2, total: 6, percentage: 33.3 });
    expect(done.body.completed_at).not.toBeNull();
    const expectedDomains = [
      { domain: 'account', covered: 1, total: 2, percentage: 50 },
      { domain: 'billing', covered: 1, total: 3, percentage: 33.3 },
      { domain: 'shipping', covered: 0, total: 1, percentage: 0 },
    ];
    expect(done.body.domains).toEqual(expectedDomains);

    const coverage = await t.call({ url: '/api/v1/coverage', key });
    expect(coverage.body).toMatchObject({
      object: 'coverage',
      has_evaluation: true,
      evaluation_id: started.body.id,
      referential_id: id,
      method: 'rank_threshold',
      domains: expectedDomains,
      overall: { covered: 2, total: 6, percentage: 33.3 },
    });

    const uncovered = await t.call({
      url: `/api/v1/coverage/evaluations/${started.body.id}/results?covered=false`,
      key,
    });
    expect(uncovered.body.data.map((r: { question: string }) => r.question).sort()).toEqual(
      [
        'Do you accept bitcoin?',
        'How do I delete my profile?',
        'How long does international shipping take?',
        'Where can I download an invoice?',
      ].sort(),
    );
    const covered = await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}/results?covered=true`, key });
    for (const result of covered.body.data) {
      expect(result.best_rank).toBeGreaterThanOrEqual(RELEVANT_RANK);
      expect(result.document_id).not.toBeNull();
    }

    // The other workspace sees neither the run nor its coverage.
    expectError(
      await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key: otherKey }),
      404,
      'not_found',
    );
    expect((await t.call({ url: '/api/v1/coverage', key: otherKey })).body.has_evaluation).toBe(false);
  });

  it('a referential_id naming nothing in this workspace is 422 invalid_parameters', async () => {
    const { key } = await t.tenant();
    const { key: otherKey } = await t.tenant();
    const foreign = await referential(otherKey, 'theirs');
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/evaluations', key, body: { referential_id: foreign } }),
      422,
      'invalid_parameters',
      'referential_id',
    );
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/coverage/evaluations', key, body: {} }),
      422,
      'missing_required_parameter',
      'referential_id',
    );
  });
});

describe('coverage evaluations with an LLM judge (LLM_BASE_URL set)', () => {
  let judged: string[] = [];
  let server: http.Server;
  let app: TestApp;
  let port: number;
  const passwordOnly = (prompt: string) => (prompt.includes('reset my password') ? 'YES' : 'NO');
  let answerFor: (prompt: string) => string = passwordOnly;
  /** Runs before the model answers: a change made while the evaluation judges. */
  let whileJudging: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    // A scripted OpenAI-compatible server: says YES only for the password question.
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        const request = JSON.parse(body) as { model: string; messages: { role: string; content: string }[] };
        const prompt = request.messages.find((m) => m.role === 'user')?.content ?? '';
        judged.push(prompt.split('\n')[0] ?? '');
        const answer = answerFor(prompt);
        const change = whileJudging;
        whileJudging = undefined;
        void (change ?? (async () => {}))().then(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              id: 'chatcmpl-1',
              object: 'chat.completion',
              model: request.model,
              choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
            }),
          );
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    ({ port } = server.address() as AddressInfo);
    app = await startTestApp({ LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, LLM_MODEL: 'judge-model' });
  });
  afterAll(async () => {
    await app.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('asks the model only about questions retrieval found passages for; covered when it says they answer', async () => {
    const { key } = await app.tenant();
    const id = await seedKnowledge(app, key);
    judged = [];
    const started = await app.call({
      method: 'POST',
      url: '/api/v1/coverage/evaluations',
      key,
      body: { referential_id: id },
    });
    expect(started.body.method).toBe('llm_judge');
    await app.jobs.runUntilIdle();
    const done = await app.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
    // Retrieval finds passages for the password and refund questions; the model accepts only the first.
    expect(done.body).toMatchObject({ status: 'completed', method: 'llm_judge', covered: 1, total: 6 });
    expect(done.body.domains).toEqual([
      { domain: 'account', covered: 1, total: 2, percentage: 50 },
      { domain: 'billing', covered: 0, total: 3, percentage: 0 },
      { domain: 'shipping', covered: 0, total: 1, percentage: 0 },
    ]);
    expect(judged.sort()).toEqual(['Question: How do I reset my password?', 'Question: What is your refund policy?']);
  });

  it('a domain renamed while the evaluation judges is reported under its new name, as the referential has it', async () => {
    const { key } = await app.tenant();
    const id = await seedKnowledge(app, key);
    // The questions were read for judging under 'billing'; it is renamed before their verdicts.
    whileJudging = async () => {
      const renamed = await app.call({
        method: 'PUT',
        url: `/api/v1/coverage/referentials/${id}/domains/rename`,
        key,
        body: { old_domain: 'billing', new_domain: 'payments' },
      });
      expect(renamed.status, renamed.text).toBe(200);
    };
    const started = await app.call({
      method: 'POST',
      url: '/api/v1/coverage/evaluations',
      key,
      body: { referential_id: id },
    });
    await app.jobs.runUntilIdle();
    expect(whileJudging).toBeUndefined();
    const done = await app.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
    expect(done.body.domains.map((d: { domain: string }) => d.domain)).toEqual(['account', 'payments', 'shipping']);
    expect(done.body).toMatchObject({ status: 'completed', total: 6 });
    const results = await app.call({ url: `/api/v1/coverage/evaluations/${started.body.id}/results?limit=100`, key });
    expect(new Set(results.body.data.map((r: { domain: string }) => r.domain))).toEqual(
      new Set(['account', 'payments', 'shipping']),
    );
  });

  it('takes the word YES or NO as the verdict; a reply that only starts like one ("NOT SURE") is none', async () => {
    const judge = createLlmJudge({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'judge-model', timeoutMs: 5000 });
    const passages = [{ title: 'Refunds', content: 'Refunds take five days.' }] as Parameters<typeof judge.answers>[1];
    try {
      for (const [reply, verdict] of [
        ['YES', true],
        ['Yes.', true],
        ['no', false],
        ['NO, they do not', false],
      ] as const) {
        answerFor = () => reply;
        expect(await judge.answers('How long do refunds take?', passages), reply).toBe(verdict);
      }
      for (const reply of ['NOT SURE', 'NONE', 'Nope', 'YESTERDAY', 'maybe']) {
        answerFor = () => reply;
        await expect(judge.answers('How long do refunds take?', passages), reply).rejects.toThrow(/neither YES nor NO/);
      }
    } finally {
      answerFor = passwordOnly;
    }
  });
});
