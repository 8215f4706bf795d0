// A coverage evaluation judges each question with the agent's retrieval, which runs within the
// search limits (src/db/heavy-queries.ts): a question whose search runs past SEARCH_TIMEOUT_MS is
// not covered (a customer asking it would get no answer), and costs the run nothing else.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, statementGate, type TestApp } from '../helpers.js';

let t: TestApp;
// Holds the knowledge searches of one question (its word "zanzibar") until released.
const zanzibar = statementGate((_, parameters) =>
  parameters.some((value) => typeof value === 'string' && value.includes('zanzibar')),
);

beforeAll(async () => {
  t = await startTestApp(
    { SEARCH_MAX_CONCURRENT: '2', SEARCH_TIMEOUT_MS: '300' },
    { wrapDb: (db) => db.withPlugin(zanzibar.plugin) },
  );
});
afterAll(async () => {
  zanzibar.release();
  await t.close();
});

it('one question whose knowledge search runs past the limit does not cost the evaluation the batch judged before it', async () => {
  const { key } = await t.tenant();
  await t.call({
    method: 'POST',
    url: '/api/v1/documents',
    key,
    body: { title: 'Returns', content: 'Parcels can be returned within thirty days.' },
  });
  const ref = await t.call({ method: 'POST', url: '/api/v1/coverage/referentials', key, body: { name: 'r' } });
  const id = ref.body.id;
  for (const question of ['Can parcels be returned?', 'Do you ship parcels to zanzibar?']) {
    const added = await t.call({
      method: 'POST',
      url: `/api/v1/coverage/referentials/${id}/questions`,
      key,
      body: { questions: [{ question, domain: 'shipping' }] },
    });
    expect(added.status).toBe(201);
  }
  zanzibar.hold();
  const started = await t.call({
    method: 'POST',
    url: '/api/v1/coverage/evaluations',
    key,
    body: { referential_id: id },
  });
  expect(started.status).toBe(202);
  setTimeout(() => zanzibar.release(), 500);
  const claimed = await t.jobs.claim();
  if (!claimed) throw new Error('nothing claimed');
  await t.jobs.run(claimed);
  const done = await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
  expect(done.body).toMatchObject({ status: 'completed', processed: 2, covered: 1, error: null });
});
