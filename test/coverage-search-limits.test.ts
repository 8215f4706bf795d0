// A coverage evaluation judges each question with the agent's retrieval, which runs within the
// search limits (src/db/heavy-queries.ts): a question whose search runs past SEARCH_TIMEOUT_MS is
// not covered (a customer asking it would get no answer), and costs the run nothing else.
import type { KyselyPlugin, QueryId, RootOperationNode } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let release = () => {};
let gate = Promise.resolve();
const holding = new WeakSet<QueryId>();
// Holds the knowledge searches of one question (its word "zanzibar") until released.
const hold: KyselyPlugin = {
  transformQuery: (args) => {
    const node = args.node as RootOperationNode & { sqlFragments?: string[]; parameters?: { value?: unknown }[] };
    if (node.parameters?.some((p) => typeof p.value === 'string' && p.value.includes('zanzibar')))
      holding.add(args.queryId);
    return args.node;
  },
  transformResult: async (args) => {
    if (holding.has(args.queryId)) await gate;
    return args.result;
  },
};

beforeAll(async () => {
  t = await startTestApp(
    { SEARCH_MAX_CONCURRENT: '2', SEARCH_TIMEOUT_MS: '300' },
    { wrapDb: (db) => db.withPlugin(hold) },
  );
});
afterAll(async () => {
  release();
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
  gate = new Promise<void>((resolve) => (release = resolve));
  const started = await t.call({
    method: 'POST',
    url: '/api/v1/coverage/evaluations',
    key,
    body: { referential_id: id },
  });
  expect(started.status).toBe(202);
  setTimeout(() => release(), 500);
  const claimed = await t.jobs.claim();
  if (!claimed) throw new Error('nothing claimed');
  await t.jobs.run(claimed);
  const done = await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
  expect(done.body).toMatchObject({ status: 'completed', processed: 2, covered: 1, error: null });
});
