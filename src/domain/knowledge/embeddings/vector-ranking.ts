// The semantic half of retrieval (docs/knowledge.md, "Semantic retrieval"): a tenant's passages
// ranked by the cosine similarity of their stored vectors to the question's, only vectors of the
// configured model compared. Passages without a vector (not embedded yet, or their job failed)
// are simply not in this ranking; the lexical one still finds them.
import { sql } from 'kysely';
import type { Db } from '../../../db/index.js';
import type { EmbeddingsClient, EmbedOptions } from './client.js';
import { EmbeddingsError } from './client.js';
import { realArray } from './sql-vector.js';

/** A question's vector and the model that computed it (only that model's vectors compare with it). */
export interface QuestionEmbedding {
  vector: number[];
  model: string;
}

export interface VectorRank {
  passage_id: string;
  /** Cosine similarity, in [-1, 1]. */
  similarity: number;
}

/**
 * The tenant's passages most similar to the question, best first (ties by passage id), at most
 * `limit`. Only vectors computed by `model` are compared.
 */
export async function vectorRankPassages(
  db: Db,
  tenantId: string,
  questionEmbedding: number[],
  limit: number,
  model: string,
): Promise<VectorRank[]> {
  if (questionEmbedding.length === 0 || limit <= 0) return [];
  const { rows } = await sql<{ passage_id: string; similarity: number }>`
    with q as (select ${realArray(questionEmbedding)} as embedding)
    select s.passage_id, s.similarity
      from (select v.passage_id::text as passage_id, knowledge_cosine(v.embedding, q.embedding) as similarity
              from knowledge_passage_vectors v, q
             where v.tenant_id = ${tenantId} and v.model = ${model}) s
     where s.similarity is not null
     order by s.similarity desc, s.passage_id
     limit ${Math.floor(limit)}
  `.execute(db);
  return rows.map((row) => ({ passage_id: row.passage_id, similarity: Number(row.similarity) }));
}

/** The question's vector; undefined for a blank question. */
export async function embedQuestion(
  client: EmbeddingsClient,
  question: string,
  options: EmbedOptions = {},
): Promise<number[] | undefined> {
  const text = question.trim();
  if (text === '') return undefined;
  const [vector] = await client.embed([text], options);
  return vector;
}

export interface SemanticDeps {
  /** Unset when no embeddings model is configured: then there is no question vector. */
  embeddings: EmbeddingsClient | undefined;
  /** Told when the question could not be embedded (the answer then rests on lexical ranking). */
  onError?: (error: EmbeddingsError) => void;
  signal?: AbortSignal;
}

/**
 * The question's vector for retrieval; undefined without an embeddings model, for a blank question,
 * and when the embeddings server fails (a question is answered from the lexical ranking rather
 * than not at all; it is not retried, so a turn does not wait on backoff).
 */
export async function questionVector(deps: SemanticDeps, question: string): Promise<number[] | undefined> {
  if (!deps.embeddings) return undefined;
  try {
    return await embedQuestion(deps.embeddings, question, {
      retries: 0,
      ...(deps.signal ? { signal: deps.signal } : {}),
    });
  } catch (error) {
    if (!(error instanceof EmbeddingsError)) throw error;
    deps.onError?.(error);
    return undefined;
  }
}
