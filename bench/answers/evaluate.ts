// The answer benchmark's measures: one corpus in one language, asked its questions through the API
// (`POST /api/v1/messages`, as a customer would) and through a plain BM25 library (MiniSearch) on
// the same articles, in the same run. Used by `bench/answers/run.ts` (the report) and by the test
// that keeps the agent ahead of BM25.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import MiniSearch from 'minisearch';
import type { DatabaseHandle } from '../../src/db/client.js';
import { EMBED_JOB } from '../../src/domain/knowledge/embeddings/jobs.js';
import { vectorRankPassages } from '../../src/domain/knowledge/embeddings/vector-ranking.js';
import { searchKnowledge } from '../../src/domain/knowledge/search.js';
import { startBenchApp } from '../support.js';

export interface CorpusDocument {
  slug: string;
  title: string;
  content: string;
}

/** A question with its right article and the fact a right answer states (any of `fact`). */
export interface Question {
  id: string;
  slug: string;
  fact: string[];
  q: Record<string, string>;
}

export interface QuestionSet {
  corpus: string;
  questions: Question[];
  /** Questions the corpus does not answer: they should be declined. */
  off_topic: { id: string; q: Record<string, string> }[];
}

export interface Scores {
  questions: number;
  hit1: number;
  hit3: number;
  mrr: number;
  /** Answers that contain one of the question's facts (the agent only). */
  facts?: number;
  /** Off-topic questions answered rather than declined (the agent only). */
  offTopicAnswered?: number;
  offTopic?: number;
  /** Median answer length in characters (the agent only). */
  medianLength?: number;
}

const ROOT = import.meta.dirname;

export function loadCorpus(corpus: string, language: string): CorpusDocument[] {
  const file = path.join(ROOT, 'corpus', corpus, `${language}.json`);
  return (JSON.parse(readFileSync(file, 'utf8')) as { documents: CorpusDocument[] }).documents;
}

export function loadQuestions(corpus: string): QuestionSet {
  return JSON.parse(readFileSync(path.join(ROOT, 'questions', `${corpus}.json`), 'utf8')) as QuestionSet;
}

/** hit@1, hit@3 and the reciprocal rank of `slug` in a ranked list of slugs. */
function rankScores(ranked: string[], slug: string) {
  const at = ranked.indexOf(slug);
  return { hit1: at === 0 ? 1 : 0, hit3: at >= 0 && at < 3 ? 1 : 0, rr: at >= 0 ? 1 / (at + 1) : 0 };
}

function summarise(rows: { hit1: number; hit3: number; rr: number }[]): Scores {
  const sum = (k: 'hit1' | 'hit3' | 'rr') => rows.reduce((s, r) => s + r[k], 0);
  return {
    questions: rows.length,
    hit1: sum('hit1'),
    hit3: sum('hit3'),
    mrr: rows.length ? sum('rr') / rows.length : 0,
  };
}

/** BM25 as a library gives it: MiniSearch over title and content, its default options. */
export function bm25Scores(documents: CorpusDocument[], set: QuestionSet, language: string): Scores {
  const index = new MiniSearch<CorpusDocument>({ idField: 'slug', fields: ['title', 'content'] });
  index.addAll(documents);
  const rows = set.questions
    .filter((q) => q.q[language])
    .map((q) =>
      rankScores(
        index.search(q.q[language] ?? '').map((r) => String(r.id)),
        q.slug,
      ),
    );
  return summarise(rows);
}

interface AgentMessage {
  content: string;
  citations: { document_id: string }[];
}

type BenchApp = Awaited<ReturnType<typeof startBenchApp>>;

/** A new workspace holding `documents`, with a key for the API and each document's slug by id. */
async function newWorkspace(bench: BenchApp, documents: CorpusDocument[], language: string) {
  const tenantId = `answers-${language}-${Math.random().toString(36).slice(2, 8)}`;
  await bench.services.tenants.createTenant({ tenant_id: tenantId, name: tenantId });
  const { secret } = await bench.services.tenants.createApiKey(tenantId, {
    name: 'answers',
    scopes: ['knowledge:write', 'conversations:write', 'agents:write'],
  });
  const call = async <T>(method: string, url: string, body: unknown): Promise<T> => {
    const response = await fetch(`${bench.origin}${url}`, {
      method,
      headers: { 'x-api-key': secret, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await response.json()) as T;
    if (response.status >= 300) throw new Error(`${method} ${url}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const slugOf = new Map<string, string>();
  for (const doc of documents) {
    const made = await call<{ id: string }>('POST', '/api/v1/documents', {
      title: doc.title,
      content: doc.content,
      language,
    });
    slugOf.set(made.id, doc.slug);
  }
  return { tenantId, call, slugOf };
}

/**
 * The rank of the best passage found for each off-topic question, in a new workspace holding
 * `documents`: what the relevance threshold is calibrated on.
 */
export async function offTopicRanks(
  database: DatabaseHandle,
  documents: CorpusDocument[],
  set: QuestionSet,
  language: string,
): Promise<number[]> {
  const bench = await startBenchApp(database);
  try {
    const { tenantId } = await newWorkspace(bench, documents, language);
    const ranks: number[] = [];
    for (const question of set.off_topic) {
      const text = question.q[language];
      if (!text) continue;
      const found = await searchKnowledge(database.db, tenantId, text, { language, limit: 1 });
      ranks.push(found[0]?.rank ?? 0);
    }
    return ranks;
  } finally {
    await bench.app.close();
  }
}

/** An off-topic question as the fused search judges it: its lexical rank and its closest passage's similarity. */
export interface OffTopicScore {
  rank: number;
  similarity: number;
}

/**
 * Runs the workspace's embedding jobs to the end, waiting out the retries of a failed one (a 429
 * from a hosted model, say); fails when a passage is left without a vector and no job is due.
 */
async function embedAll(bench: BenchApp, database: DatabaseHandle, tenantId: string) {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    await bench.jobs.runUntilIdle();
    const { rows } = await sql<{ missing: number; waiting: number; last_error: string | null }>`
      select (select count(*)::int from knowledge_passages p
                left join knowledge_passage_vectors v on v.passage_id = p.id and v.model = ${bench.config.embeddingsModel}
               where p.tenant_id = ${tenantId} and v.passage_id is null) as missing,
             (select count(*)::int from jobs
               where tenant_id = ${tenantId} and kind = ${EMBED_JOB} and status in ('queued', 'running')) as waiting,
             (select max(last_error) from jobs where tenant_id = ${tenantId} and kind = ${EMBED_JOB}) as last_error
    `.execute(database.db);
    const { missing = 0, waiting = 0, last_error } = rows[0] ?? {};
    if (missing === 0) return;
    if (waiting === 0 || Date.now() > deadline) {
      throw new Error(`${missing} passages were not embedded: ${last_error ?? 'no embedding job ran'}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * Each off-topic question's lexical rank and the cosine similarity of its closest passage, in a new
 * workspace holding `documents` embedded by the model `env` configures (EMBEDDINGS_*): what
 * EMBEDDINGS_MIN_SIMILARITY is calibrated on. The embedding jobs run to the end first.
 */
export async function offTopicSimilarities(
  database: DatabaseHandle,
  documents: CorpusDocument[],
  set: QuestionSet,
  language: string,
  env: Record<string, string>,
): Promise<OffTopicScore[]> {
  const bench = await startBenchApp(database, env);
  try {
    const { tenantId } = await newWorkspace(bench, documents, language);
    await embedAll(bench, database, tenantId);
    const scores: OffTopicScore[] = [];
    for (const question of set.off_topic) {
      const text = question.q[language];
      if (!text) continue;
      const embedding = await bench.services.semantic.embedQuestion(text, bench.config.embeddingsTimeoutMs);
      if (!embedding) throw new Error(`the embeddings server did not embed the question '${text}'`);
      const [closest] = await vectorRankPassages(database.db, tenantId, embedding.vector, 1, embedding.model);
      const [found] = await searchKnowledge(database.db, tenantId, text, { language, limit: 1 });
      scores.push({ rank: found?.rank ?? 0, similarity: closest?.similarity ?? 0 });
    }
    return scores;
  } finally {
    await bench.app.close();
  }
}

/**
 * The agent on a new workspace holding `documents`: each question sent as a customer message in
 * `language`. hit@1 is its answer's first citation (none when it declines); hit@3 and MRR are the
 * knowledge search's order, before the relevance threshold, as BM25's are.
 */
export async function agentScores(
  database: DatabaseHandle,
  documents: CorpusDocument[],
  set: QuestionSet,
  language: string,
  env: Record<string, string> = {},
): Promise<Scores> {
  const bench = await startBenchApp(database, env);
  try {
    const { tenantId, call, slugOf } = await newWorkspace(bench, documents, language);

    const rows: { hit1: number; hit3: number; rr: number }[] = [];
    let facts = 0;
    const lengths: number[] = [];
    for (const question of set.questions) {
      const text = question.q[language];
      if (!text) continue;
      const message = await call<AgentMessage>('POST', '/api/v1/messages', { content: text, language });
      const found = await searchKnowledge(database.db, tenantId, text, { language, limit: 10 });
      const ranked = found.map((p) => slugOf.get(p.document_id) ?? '');
      const first = message.citations[0] ? slugOf.get(message.citations[0].document_id) : undefined;
      const scores = rankScores(ranked, question.slug);
      rows.push({ ...scores, hit1: first === question.slug ? 1 : 0 });
      if (message.citations.length > 0) lengths.push(message.content.length);
      if (message.citations.length > 0 && question.fact.some((f) => message.content.includes(f))) facts++;
    }
    let offTopicAnswered = 0;
    let offTopic = 0;
    for (const question of set.off_topic) {
      const text = question.q[language];
      if (!text) continue;
      offTopic++;
      const message = await call<AgentMessage>('POST', '/api/v1/messages', { content: text, language });
      if (message.citations.length > 0) offTopicAnswered++;
    }
    lengths.sort((a, b) => a - b);
    return {
      ...summarise(rows),
      facts,
      offTopicAnswered,
      offTopic,
      medianLength: lengths.length ? (lengths[Math.floor(lengths.length / 2)] ?? 0) : 0,
    };
  } finally {
    await bench.app.close();
  }
}
