// Answers from semantic retrieval (docs/knowledge.md, "Semantic retrieval"), over POST
// /api/v1/messages with the local embeddings server of test/support/embeddings-server.ts: with an
// embeddings model configured the agent's knowledge search fuses lexical and vector rankings, so a
// question that shares no word with an article but means what it says is answered from it; one
// below EMBEDDINGS_MIN_SIMILARITY of every passage is declined and recorded as a knowledge gap; a
// failing embeddings server leaves the lexical answer as it was.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNKNOWN_ANSWER } from '../../src/domain/agent/builtin-provider.js';
import { vectorRankPassages } from '../../src/domain/knowledge/embeddings/vector-ranking.js';
import { RELEVANT_RANK, searchKnowledge } from '../../src/domain/knowledge/search.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { bagOfWords, type EmbeddingsServer, embeddingsServer, failing, MODEL } from '../support/embeddings-server.js';

const MIN_SIMILARITY = 0.22;
const EMBEDDINGS_KEY = 'sk-embeddings-test-key-0123456789';

const ARTICLES = [
  { title: 'Symbolic links', content: 'ln -s creates symbolic links between paths.' },
  { title: 'Refund policy', content: 'Refunds are paid within five days of the return.' },
  { title: 'Opening hours', content: 'The shop opens at nine on weekdays.' },
];

/** Says what the symbolic links article says, in none of its words ("shortcut" is "link" to the model). */
const IN_OTHER_WORDS = 'Can I make shortcuts?';
/** Shares the synonym, drowned in words no passage holds: close to the article, not close enough. */
const TOO_FAR = 'Which keyboard shortcut reopens browser tabs you closed by mistake yesterday?';

const words = (text: string) => new Set(text.toLowerCase().match(/\p{L}+/gu) ?? []);

/** A workspace holding the articles, embedded: each article's id by title. */
async function workspace(app: TestApp) {
  const tenant = await app.tenant();
  const ids = new Map<string, string>();
  for (const article of ARTICLES) {
    const created = await app.call({ method: 'POST', url: '/api/v1/documents', key: tenant.key, body: article });
    expect(created.status, created.text).toBe(201);
    ids.set(article.title, created.body.id);
  }
  await app.jobs.runUntilIdle();
  return { ...tenant, ids };
}

const ask = async (app: TestApp, key: string, content: string) => {
  const sent = await app.call({ method: 'POST', url: '/api/v1/messages', key, body: { content } });
  expect(sent.status, sent.text).toBe(200);
  return sent.body as { id: string; content: string; citations: { document_id: string }[] };
};

const gapQuestions = async (app: TestApp, key: string) =>
  (await app.call({ url: '/api/v1/knowledge-update-requests', key })).body.data.map(
    (request: { question: string }) => request.question,
  );

describe('with an embeddings model (EMBEDDINGS_* set)', () => {
  let server: EmbeddingsServer;
  let app: TestApp;
  const logs: { level: number; msg: string; err?: Record<string, unknown> }[] = [];

  beforeAll(async () => {
    server = await embeddingsServer();
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) logs.push(JSON.parse(line));
        done();
      },
    });
    app = await startTestApp(
      {
        EMBEDDINGS_BASE_URL: server.url,
        EMBEDDINGS_MODEL: MODEL,
        EMBEDDINGS_MIN_SIMILARITY: String(MIN_SIMILARITY),
        EMBEDDINGS_API_KEY: EMBEDDINGS_KEY,
        LOG_LEVEL: 'warn',
      },
      { logStream },
    );
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await server?.close();
  });

  it('a question sharing no word with an article but close to it in meaning is answered from it', async () => {
    const { key, ids } = await workspace(app);
    const article = ARTICLES[0] as (typeof ARTICLES)[number];
    const shared = [...words(IN_OTHER_WORDS)].filter((w) => words(`${article.title} ${article.content}`).has(w));
    expect(shared).toEqual([]);

    const answer = await ask(app, key, IN_OTHER_WORDS);
    expect(answer.content).not.toBe(UNKNOWN_ANSWER);
    expect(answer.citations[0]?.document_id).toBe(ids.get('Symbolic links'));
    expect(await gapQuestions(app, key)).toEqual([]);
  });

  it('a question below EMBEDDINGS_MIN_SIMILARITY of every passage, with no word of the knowledge, is declined and recorded as a gap', async () => {
    const { tenantId, key } = await workspace(app);
    // Close to the article in some measure (a rank of raw similarity would answer it), not enough.
    const [closest] = await vectorRankPassages(app.database.db, tenantId, bagOfWords(TOO_FAR), 1, MODEL);
    expect(closest?.similarity).toBeGreaterThan(0.1);
    expect(closest?.similarity).toBeLessThan(MIN_SIMILARITY);
    expect(await searchKnowledge(app.database.db, tenantId, TOO_FAR)).toEqual([]);

    const answer = await ask(app, key, TOO_FAR);
    expect(answer.content).toBe(UNKNOWN_ANSWER);
    expect(answer.citations).toEqual([]);
    expect(await gapQuestions(app, key)).toEqual([TOO_FAR]);
  });

  it('an embeddings server answering 500 leaves the lexical answer as it was, and the log says why, once', async () => {
    const { tenantId, key, ids } = await workspace(app);
    const question = 'When are refunds paid?';
    // The lexical search answers it on its own.
    const lexical = await searchKnowledge(app.database.db, tenantId, question);
    expect(lexical[0]?.rank).toBeGreaterThanOrEqual(RELEVANT_RANK);
    server.answer(failing);
    server.received.length = 0;
    try {
      const answer = await ask(app, key, question);
      expect(server.received.flatMap((r) => r.input)).toContain(question);
      expect(answer.citations[0]?.document_id).toBe(ids.get('Refund policy'));
      const trace = await app.call({ url: `/api/v1/messages/${answer.id}/trace`, key });
      expect(
        trace.body.search.candidates.map((c: { document_id: string; rank: number }) => [c.document_id, c.rank]),
      ).toEqual(lexical.map((p) => [p.document_id, p.rank]));
      expect(await gapQuestions(app, key)).toEqual([]);
      // A second question while the server still fails: counted, not logged again within the minute.
      expect((await ask(app, key, 'How long do refunds take?')).citations).not.toEqual([]);
      const warnings = logs.filter((line) => line.msg.includes('could not be embedded'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 40, err: { reason: 'rejected', status: 500 } });
      expect(JSON.stringify(logs)).not.toContain(EMBEDDINGS_KEY);
    } finally {
      server.answer(() => undefined);
    }
  });
});

describe('without an embeddings model', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  }, 60_000);
  afterAll(async () => {
    await app?.close();
  });

  it('the question sharing no word with the article is declined and recorded as a knowledge gap', async () => {
    const { key } = await workspace(app);
    const answer = await ask(app, key, IN_OTHER_WORDS);
    expect(answer.content).toBe(UNKNOWN_ANSWER);
    expect(answer.citations).toEqual([]);
    expect(await gapQuestions(app, key)).toEqual([IN_OTHER_WORDS]);
  });
});
