// Semantic retrieval: the embeddings client against a local OpenAI-compatible embeddings server
// (test/support/embeddings-server.ts), passages embedded by the job queue, vectors ranked
// by cosine similarity within a tenant and a model, and reciprocal rank fusion.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createEmbeddingsClient, EmbeddingsError } from '../../src/domain/knowledge/embeddings/client.js';
import { fuseRanks } from '../../src/domain/knowledge/embeddings/fusion.js';
import { EMBED_JOB, enqueueMissingEmbeddings } from '../../src/domain/knowledge/embeddings/jobs.js';
import { questionVector, vectorRankPassages } from '../../src/domain/knowledge/embeddings/vector-ranking.js';
import { similarityRank } from '../../src/domain/knowledge/fused-search.js';
import { RELEVANT_RANK } from '../../src/domain/knowledge/search.js';
import { startTestApp, type TestApp } from '../helpers.js';
import {
  type Behaviour,
  bagOfWords,
  cosine,
  DIMENSIONS,
  type EmbeddingsServer,
  embeddingsServer,
  failing,
  MODEL,
} from '../support/embeddings-server.js';

describe('passages embedded by the job queue (EMBEDDINGS_* set)', () => {
  let server: EmbeddingsServer;
  let app: TestApp;

  beforeAll(async () => {
    server = await embeddingsServer();
    app = await startTestApp({
      EMBEDDINGS_BASE_URL: server.url,
      EMBEDDINGS_MODEL: MODEL,
      EMBEDDINGS_API_KEY: 'sk-embeddings-test',
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await server?.close();
  });

  async function createDocument(key: string, title: string, content: string): Promise<string> {
    const created = await app.call({ method: 'POST', url: '/api/v1/documents', key, body: { title, content } });
    expect(created.status, created.text).toBe(201);
    return created.body.id;
  }

  async function passagesOf(tenantId: string, documentId?: string) {
    const { rows } = await sql<{ id: string; model: string | null; embedding: number[] | null }>`
      select p.id::text as id, v.model, v.embedding
        from knowledge_passages p left join knowledge_passage_vectors v on v.passage_id = p.id
       where p.tenant_id = ${tenantId} ${documentId ? sql`and p.document_id = ${documentId}` : sql``}
       order by p.id`.execute(app.database.db);
    return rows;
  }

  const vectorCount = async (tenantId: string) => {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from knowledge_passage_vectors where tenant_id = ${tenantId}`.execute(app.database.db);
    return rows[0]?.n ?? 0;
  };

  it('stores a vector of the model for every passage of a document and its translations, embedding each once', async () => {
    const { tenantId, key } = await app.tenant();
    const id = await createDocument(
      key,
      'Account settings',
      '## Passwords\n\nReset your password from the sign-in page.\n\n## Billing\n\nInvoices are sent monthly by email.',
    );
    server.received.length = 0;
    await app.jobs.runUntilIdle();
    const passages = await passagesOf(tenantId, id);
    expect(passages.length).toBe(2);
    for (const passage of passages) {
      expect(passage.model).toBe(MODEL);
      expect(passage.embedding).toHaveLength(DIMENSIONS);
    }
    expect(server.received.map((r) => [r.path, r.authorization, r.model])).toEqual([
      ['/v1/embeddings', 'Bearer sk-embeddings-test', MODEL],
    ]);
    // The model reads the title and heading path with the text.
    expect(server.received[0]?.input).toContain(
      'Account settings\n\nPasswords\n\nReset your password from the sign-in page.',
    );

    // A translation's passages are embedded; the document's are not sent again.
    server.received.length = 0;
    const translated = await app.call({
      method: 'POST',
      url: `/api/v1/documents/${id}/translations`,
      key,
      body: { language: 'fr', title: 'Paramètres du compte', content: 'Réinitialisez votre mot de passe.' },
    });
    expect(translated.status, translated.text).toBe(201);
    await app.jobs.runUntilIdle();
    expect(server.received.flatMap((r) => r.input)).toEqual([
      'Paramètres du compte\n\nRéinitialisez votre mot de passe.',
    ]);
    const all = await passagesOf(tenantId, id);
    expect(all.length).toBe(3);
    expect(all.every((p) => p.model === MODEL && p.embedding?.length === DIMENSIONS)).toBe(true);
    // The stored vector is the server's.
    const french = all.find((p) => !passages.some((q) => q.id === p.id));
    const expected = bagOfWords('Paramètres du compte\n\nRéinitialisez votre mot de passe.');
    expect(french?.embedding).toHaveLength(DIMENSIONS);
    for (const [i, x] of (french?.embedding ?? []).entries()) expect(x).toBeCloseTo(expected[i] ?? 0, 5);
  });

  it('deleting a document deletes its vectors', async () => {
    const { tenantId, key } = await app.tenant();
    const kept = await createDocument(key, 'Shipping', 'Parcels leave the warehouse within two days.');
    const gone = await createDocument(key, 'Returns', 'Return an item within thirty days for a refund.');
    await app.jobs.runUntilIdle();
    expect(await vectorCount(tenantId)).toBe(2);
    const deleted = await app.call({ method: 'DELETE', url: `/api/v1/documents/${gone}`, key });
    expect(deleted.status, deleted.text).toBe(200);
    expect(await vectorCount(tenantId)).toBe(1);
    expect((await passagesOf(tenantId, kept))[0]?.model).toBe(MODEL);
  });

  it("ranks a tenant's passages by cosine similarity to the question, never another tenant's nor another model's", async () => {
    const a = await app.tenant();
    const b = await app.tenant();
    // Written last, the best passage has the highest id.
    const invoices = await createDocument(a.key, 'Invoices', 'Invoices and receipts are emailed every month.');
    await createDocument(a.key, 'Shipping times', 'Parcels ship from the warehouse in two days.');
    const password = await createDocument(
      a.key,
      'Password reset',
      'To reset a forgotten password, open the sign-in page.',
    );
    // The other tenant holds the question word for word.
    const foreign = await createDocument(b.key, 'Reset my password', 'reset my password');
    await app.jobs.runUntilIdle();

    const question = bagOfWords('reset my password');
    const ranked = await vectorRankPassages(app.database.db, a.tenantId, question, 10, MODEL);
    const own = await passagesOf(a.tenantId);
    expect(ranked.map((r) => r.passage_id).sort()).toEqual(own.map((p) => p.id).sort());
    const foreignIds = (await passagesOf(b.tenantId, foreign)).map((p) => p.id);
    expect(ranked.some((r) => foreignIds.includes(r.passage_id))).toBe(false);
    // Best first, each similarity the cosine of the stored vectors.
    expect(ranked[0]?.passage_id).toBe((await passagesOf(a.tenantId, password))[0]?.id);
    for (let i = 1; i < ranked.length; i++) {
      expect(ranked[i - 1]?.similarity ?? 0).toBeGreaterThanOrEqual(ranked[i]?.similarity ?? 0);
    }
    for (const row of ranked) {
      const stored = own.find((p) => p.id === row.passage_id)?.embedding ?? [];
      expect(row.similarity).toBeCloseTo(cosine(stored, question), 5);
    }
    expect(await vectorRankPassages(app.database.db, a.tenantId, question, 1, MODEL)).toEqual(ranked.slice(0, 1));

    // The question embedded by the server, through the one call retrieval makes.
    const embedding = await app.services.semantic.embedQuestion('reset my password', 5000);
    expect(embedding?.model).toBe(MODEL);
    const viaServer = await vectorRankPassages(app.database.db, a.tenantId, embedding?.vector ?? [], 10, MODEL);
    expect(viaServer.map((r) => r.passage_id)).toEqual(ranked.map((r) => r.passage_id));

    // Vectors of another model are never compared with the question's.
    const invoiceIds = (await passagesOf(a.tenantId, invoices)).map((p) => p.id);
    await sql`update knowledge_passage_vectors set model = 'another-model'
               where passage_id = any(${invoiceIds}::bigint[])`.execute(app.database.db);
    const withoutInvoices = await vectorRankPassages(app.database.db, a.tenantId, question, 10, MODEL);
    expect(withoutInvoices.map((r) => r.passage_id)).toEqual(
      ranked.map((r) => r.passage_id).filter((id) => !invoiceIds.includes(id)),
    );
  });

  it('a failing embeddings server leaves the document written and the job queued again; it then succeeds', async () => {
    const { tenantId, key } = await app.tenant();
    server.answer(failing);
    try {
      const id = await createDocument(key, 'Opening hours', 'The shop opens at nine on weekdays.');
      const read = await app.call({ url: `/api/v1/documents/${id}`, key });
      expect(read.status).toBe(200);
      await app.jobs.runUntilIdle();
      const { rows } = await sql<{ status: string; attempts: number; last_error: string | null }>`
        select status, attempts, last_error from jobs where tenant_id = ${tenantId} and kind = ${EMBED_JOB}`.execute(
        app.database.db,
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]?.status).toBe('queued');
      expect(rows[0]?.attempts).toBe(1);
      expect(rows[0]?.last_error).toContain('The embeddings server answered 500: model overloaded');
      expect(await vectorCount(tenantId)).toBe(0);
      // A question is still answered (lexically): no question vector, the failure reported.
      const errors: EmbeddingsError[] = [];
      const vector = await questionVector(
        {
          embeddings: createEmbeddingsClient({ baseUrl: server.url, model: MODEL, timeoutMs: 5000 }),
          onError: (error) => errors.push(error),
        },
        'opening hours',
      );
      expect(vector).toBeUndefined();
      expect(errors.map((e) => e.status)).toEqual([500]);

      server.answer(() => undefined);
      await sql`update jobs set run_at = now() where tenant_id = ${tenantId} and kind = ${EMBED_JOB}`.execute(
        app.database.db,
      );
      await app.jobs.runUntilIdle();
      expect(await vectorCount(tenantId)).toBe(1);
      const { rows: after } = await sql<{ status: string; attempts: number }>`
        select status, attempts from jobs where tenant_id = ${tenantId} and kind = ${EMBED_JOB}`.execute(
        app.database.db,
      );
      expect(after).toEqual([{ status: 'succeeded', attempts: 2 }]);
    } finally {
      server.answer(() => undefined);
    }
  }, 60_000);

  it("an applied knowledge update request's answer is embedded, appended to a document or as a new one", async () => {
    const { tenantId, key } = await app.tenant();
    const faq = await createDocument(key, 'Shipping FAQ', 'We ship worldwide.');
    await app.jobs.runUntilIdle();
    const apply = async (question: string, body: Record<string, unknown>) => {
      const request = await app.services.knowledgeGaps.recordGap(tenantId, { question });
      const base = `/api/v1/knowledge-update-requests/${request.id}`;
      expect(
        (await app.call({ method: 'POST', url: `${base}/review`, key, body: { decision: 'approve' } })).status,
      ).toBe(200);
      const applied = await app.call({ method: 'POST', url: `${base}/apply`, key, body });
      expect(applied.status, applied.text).toBe(200);
      return applied.body.document_id as string;
    };
    server.received.length = 0;
    await apply('How long does shipping to Japan take?', { proposed_answer: 'About 7 days.', document_id: faq });
    const created = await apply('Can I pay by invoice?', { proposed_answer: 'Yes, for companies.' });
    await app.jobs.runUntilIdle();
    const sent = server.received.flatMap((r) => r.input);
    expect(sent.some((text) => text.includes('About 7 days.'))).toBe(true);
    expect(sent.some((text) => text.includes('Yes, for companies.'))).toBe(true);
    for (const id of [faq, created]) {
      const passages = await passagesOf(tenantId, id);
      expect(passages.length).toBeGreaterThan(0);
      expect(passages.every((p) => p.model === MODEL)).toBe(true);
    }
  });

  it('the sweep queues again the documents whose passages lack vectors', async () => {
    const { tenantId, key } = await app.tenant();
    const id = await createDocument(key, 'Gift cards', 'Gift cards never expire.');
    await app.jobs.runUntilIdle();
    await sql`delete from knowledge_passage_vectors where tenant_id = ${tenantId}`.execute(app.database.db);
    // Documents of other tests may be queued too; this one is.
    expect(await enqueueMissingEmbeddings(app.jobs, app.database.db, MODEL)).toBeGreaterThanOrEqual(1);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from jobs
       where tenant_id = ${tenantId} and kind = ${EMBED_JOB} and status = 'queued'
         and payload->>'document_id' = ${id}`.execute(app.database.db);
    expect(rows[0]?.n).toBe(1);
    await app.jobs.runUntilIdle();
    expect(await vectorCount(tenantId)).toBe(1);
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

  it('queues no embedding and embeds no question (retrieval is lexical only)', async () => {
    const { tenantId, key } = await app.tenant();
    const created = await app.call({
      method: 'POST',
      url: '/api/v1/documents',
      key,
      body: { title: 'Password reset', content: 'Reset your password from the sign-in page.' },
    });
    expect(created.status).toBe(201);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from jobs where tenant_id = ${tenantId} and kind = ${EMBED_JOB}`.execute(
      app.database.db,
    );
    expect(rows[0]?.n).toBe(0);
    expect(await app.services.semantic.embedQuestion('reset password', 5000)).toBeUndefined();
  });

  it('an embeddings URL needs a model, and must be http(s)', () => {
    expect(() => loadConfig({ EMBEDDINGS_BASE_URL: 'http://127.0.0.1:1/v1' })).toThrow(ConfigError);
    expect(() => loadConfig({ EMBEDDINGS_BASE_URL: 'http://127.0.0.1:1/v1' })).toThrow(/EMBEDDINGS_MODEL/);
    expect(() => loadConfig({ EMBEDDINGS_BASE_URL: 'ftp://models', EMBEDDINGS_MODEL: 'm' })).toThrow(
      /EMBEDDINGS_BASE_URL must use http: or https:/,
    );
    expect(() => loadConfig({ EMBEDDINGS_TIMEOUT_MS: '5s' })).toThrow(/EMBEDDINGS_TIMEOUT_MS/);
    const config = loadConfig({ EMBEDDINGS_BASE_URL: 'http://127.0.0.1:1/v1', EMBEDDINGS_MODEL: 'm' });
    expect([config.embeddingsModel, config.embeddingsTimeoutMs]).toEqual(['m', 30_000]);
  });

  it('EMBEDDINGS_MIN_SIMILARITY is a number between 0 and 1, 0.5 unless set', () => {
    expect(loadConfig({}).embeddingsMinSimilarity).toBe(0.5);
    expect(loadConfig({ EMBEDDINGS_MIN_SIMILARITY: '0.42' }).embeddingsMinSimilarity).toBe(0.42);
    for (const bad of ['0', '1', '1.5', '-0.2', 'high', '0.5x']) {
      expect(() => loadConfig({ EMBEDDINGS_MIN_SIMILARITY: bad })).toThrow(
        /EMBEDDINGS_MIN_SIMILARITY must be a number between 0 and 1/,
      );
    }
  });
});

describe('the embeddings client', () => {
  let server: EmbeddingsServer;
  beforeAll(async () => {
    server = await embeddingsServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  const client = (options: { retries?: number; timeoutMs?: number } = {}) =>
    createEmbeddingsClient({
      baseUrl: `${server.url}/`,
      model: MODEL,
      timeoutMs: options.timeoutMs ?? 5000,
      retryBaseMs: 10,
      ...(options.retries !== undefined ? { retries: options.retries } : {}),
    });

  it('sends inputs in batches of 64 and answers one vector per input, in order', async () => {
    server.answer(() => undefined);
    server.received.length = 0;
    const inputs = Array.from({ length: 130 }, (_, i) => `passage number ${i} about topic ${i % 7}`);
    const vectors = await client().embed(inputs);
    expect(server.received.map((r) => r.input.length)).toEqual([64, 64, 2]);
    expect(server.received.every((r) => r.path === '/v1/embeddings' && r.authorization === undefined)).toBe(true);
    expect(vectors).toHaveLength(130);
    vectors.forEach((vector, i) => {
      expect(vector).toEqual(bagOfWords(inputs[i] ?? ''));
    });
  });

  it('retries a 429 and a 5xx, and not a 400', async () => {
    let calls = 0;
    server.answer(() => {
      calls++;
      if (calls === 1)
        return { status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': '0' } };
      if (calls === 2) return { status: 503, body: 'unavailable' };
      return undefined;
    });
    expect(await client().embed(['hello world'])).toEqual([bagOfWords('hello world')]);
    expect(calls).toBe(3);

    calls = 0;
    server.answer(() => {
      calls++;
      return { status: 400, body: { error: { message: "'input' is too long" } } };
    });
    const error = await client()
      .embed(['hello'])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EmbeddingsError);
    expect(error).toMatchObject({ reason: 'rejected', status: 400, retryable: false });
    expect((error as Error).message).toBe("The embeddings server answered 400: 'input' is too long");
    expect(calls).toBe(1);

    // Retries used up: the last failure is reported.
    calls = 0;
    server.answer((): ReturnType<Behaviour> => {
      calls++;
      return { status: 502, body: { error: { message: 'bad gateway' } } };
    });
    await expect(client({ retries: 2 }).embed(['hello'])).rejects.toMatchObject({ reason: 'rejected', status: 502 });
    expect(calls).toBe(3);
  });

  it('reports a timeout, an unreachable server and an answer that does not fit as typed errors', async () => {
    server.answer(() => 'hang');
    await expect(client({ retries: 0, timeoutMs: 200 }).embed(['hello'])).rejects.toMatchObject({
      name: 'EmbeddingsError',
      reason: 'timeout',
      message: 'The embeddings server did not answer within 200 ms.',
    });
    server.answer(() => ({ status: 200, body: { data: [] } }));
    await expect(client().embed(['hello'])).rejects.toMatchObject({ reason: 'invalid_response' });
    server.answer(() => ({ status: 200, body: { data: [{ index: 0, embedding: 'AAAA' }] } }));
    await expect(client().embed(['hello'])).rejects.toMatchObject({ reason: 'invalid_response' });
    const closed = createEmbeddingsClient({
      baseUrl: 'http://127.0.0.1:1/v1',
      model: MODEL,
      timeoutMs: 5000,
      retries: 0,
    });
    await expect(closed.embed(['hello'])).rejects.toMatchObject({ reason: 'unreachable' });
    server.answer(() => undefined);
    expect(await client().embed([])).toEqual([]);
  });
});

describe('similarityRank (a similarity on the lexical rank scale)', () => {
  it('maps EMBEDDINGS_MIN_SIMILARITY onto RELEVANT_RANK exactly, keeps the order, and stays in [0, 1)', () => {
    for (const min of [0.2, 0.5, 0.83]) {
      expect(similarityRank(min, min)).toBe(RELEVANT_RANK);
      expect(similarityRank(min - 0.001, min)).toBeLessThan(RELEVANT_RANK);
      expect(similarityRank(min + 0.001, min)).toBeGreaterThan(RELEVANT_RANK);
      expect(similarityRank(0, min)).toBe(0);
      expect(similarityRank(-0.4, min)).toBe(0);
      expect(similarityRank(1, min)).toBeLessThan(1);
      expect(similarityRank(1.000001, min)).toBeLessThan(1);
    }
    const ranks = [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1].map((s) => similarityRank(s, 0.5));
    expect([...ranks].sort((a, b) => a - b)).toEqual(ranks);
  });
});

describe('fuseRanks (reciprocal rank fusion)', () => {
  it('adds 1 / (k + rank) from each list and orders the ids best first', () => {
    const fused = fuseRanks(['a', 'b', 'c'], ['c', 'd', 'a']);
    expect([...fused.keys()]).toEqual(['a', 'c', 'b', 'd']);
    expect(fused.get('a')).toBeCloseTo(1 / 61 + 1 / 63, 12);
    expect(fused.get('c')).toBeCloseTo(1 / 63 + 1 / 61, 12);
    expect(fused.get('b')).toBeCloseTo(1 / 62, 12);
    expect(fused.get('d')).toBeCloseTo(1 / 62, 12);
  });

  it('takes k, counts an id repeated in one list at its best rank, and fuses empty lists to nothing', () => {
    const fused = fuseRanks(['x', 'y', 'x'], ['y'], 1);
    expect(fused.get('x')).toBe(1 / 2);
    expect(fused.get('y')).toBe(1 / 3 + 1 / 2);
    expect([...fused.keys()]).toEqual(['y', 'x']);
    expect(fuseRanks([], []).size).toBe(0);
    expect([...fuseRanks([], ['s1', 's2']).keys()]).toEqual(['s1', 's2']);
    expect(() => fuseRanks(['a'], [], -1)).toThrow(RangeError);
  });
});

/** Polls `condition` every 50 ms until it holds; fails after `timeoutMs` (generous: not a timing test). */
async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('crawled pages embedded by running workers', () => {
  let server: EmbeddingsServer;
  let site: http.Server;
  let app: TestApp;
  const pages = new Map<string, string>();

  beforeAll(async () => {
    server = await embeddingsServer();
    site = http.createServer((req, res) => {
      const body = pages.get(req.url ?? '/');
      if (body === undefined) res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not found</h1>');
      else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    app = await startTestApp(
      {
        EMBEDDINGS_BASE_URL: server.url,
        EMBEDDINGS_MODEL: MODEL,
        EMBEDDINGS_TIMEOUT_MS: '300000',
        ALLOW_PRIVATE_TARGETS: 'true',
        JOB_POLL_MS: '50',
      },
      { startJobs: true },
    );
  }, 60_000);
  afterAll(async () => {
    server?.release();
    await app?.close();
    await server?.close();
    site?.closeAllConnections();
    await new Promise((resolve) => site?.close(resolve));
  });

  const page = (title: string, text: string, links = '') =>
    `<!doctype html><html lang="en"><head><title>${title}</title></head><body><main><p>${text}</p>${links}</main></body></html>`;

  it('embeds the pages a sync adds and changes; embedding jobs waiting on the server hold up no sync', async () => {
    const { tenantId, key } = await app.tenant();
    const missing = async () => {
      const { rows } = await sql<{ passages: number; vectors: number }>`
        select count(*)::int as passages, count(v.passage_id)::int as vectors
          from knowledge_passages p left join knowledge_passage_vectors v on v.passage_id = p.id and v.model = ${MODEL}
         where p.tenant_id = ${tenantId}`.execute(app.database.db);
      return rows[0] ?? { passages: 0, vectors: 0 };
    };
    const sources = async (id: string) => (await app.call({ url: `/api/v1/sources/${id}`, key })).body;

    // The embeddings server keeps its answers: every embedding worker waits on it.
    server.answer(() => 'hold');
    server.received.length = 0;
    for (const title of ['One', 'Two', 'Three']) {
      const created = await app.call({
        method: 'POST',
        url: '/api/v1/documents',
        key,
        body: { title, content: `Document ${title}.` },
      });
      expect(created.status).toBe(201);
    }
    await waitFor('two embedding requests', async () => server.received.length >= 2);

    const { port } = site.address() as AddressInfo;
    pages.set('/', page('Home', 'Welcome to the help center.', '<a href="/refunds">Refunds</a>'));
    pages.set('/refunds', page('Refunds', 'Refunds are paid within five days.'));
    const source = await app.call({
      method: 'POST',
      url: '/api/v1/sources',
      key,
      body: { name: 'Help', source_type: 'website', domain: `http://127.0.0.1:${port}` },
    });
    expect(source.status, source.text).toBe(201);
    const sync = async () => {
      const requested = await app.call({ method: 'POST', url: `/api/v1/sources/${source.body.id}/sync`, key });
      expect(requested.status, requested.text).toBeLessThan(300);
    };
    await sync();
    await waitFor('the sync', async () => (await sources(source.body.id)).sync_status === 'synced');
    expect((await sources(source.body.id)).document_count).toBe(2);

    server.answer(() => undefined);
    server.release();
    await waitFor('every passage embedded', async () => {
      const { passages, vectors } = await missing();
      return passages === 5 && vectors === 5;
    });
    expect(server.received.flatMap((r) => r.input)).toContain('Refunds\n\nRefunds are paid within five days.');

    // A changed page: its new passage is embedded, its old vector went with its old passage.
    server.received.length = 0;
    const before = (await sources(source.body.id)).last_synced_at;
    pages.set('/refunds', page('Refunds', 'Refunds are paid within ten days.'));
    await sync();
    await waitFor('the second sync', async () => {
      const current = await sources(source.body.id);
      return current.sync_status === 'synced' && current.last_synced_at !== before;
    });
    await waitFor('the changed page embedded', async () => {
      const { passages, vectors } = await missing();
      return passages === 5 && vectors === 5;
    });
    expect(server.received.flatMap((r) => r.input)).toEqual(['Refunds\n\nRefunds are paid within ten days.']);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from knowledge_passage_vectors where tenant_id = ${tenantId}`.execute(app.database.db);
    expect(rows[0]?.n).toBe(5);
  }, 120_000);
});
