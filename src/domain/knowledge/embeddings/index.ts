// Semantic retrieval, present when an embeddings model is configured (EMBEDDINGS_BASE_URL and
// EMBEDDINGS_MODEL; docs/knowledge.md, "Semantic retrieval"): the client, the job that embeds
// passages, the hook documents call when they write passages, and the question's candidates.
import type { Config } from '../../../config.js';
import type { Db } from '../../../db/index.js';
import type { JobQueue } from '../../../jobs/queue.js';
import { createEmbeddingsClient, type EmbeddingsClient, type EmbeddingsError } from './client.js';
import { enqueueEmbedding, registerEmbeddingJob } from './jobs.js';
import { type QuestionEmbedding, questionVector } from './vector-ranking.js';

type EmbeddingsConfig = Pick<
  Config,
  'embeddingsBaseUrl' | 'embeddingsApiKey' | 'embeddingsModel' | 'embeddingsTimeoutMs'
>;

/** The configured client; undefined when no embeddings model is configured. */
export function embeddingsClientFromConfig(config: EmbeddingsConfig): EmbeddingsClient | undefined {
  if (config.embeddingsBaseUrl === undefined || config.embeddingsModel === undefined) return undefined;
  return createEmbeddingsClient({
    baseUrl: config.embeddingsBaseUrl,
    apiKey: config.embeddingsApiKey,
    model: config.embeddingsModel,
    timeoutMs: config.embeddingsTimeoutMs,
  });
}

/** Writes passages: the executor is the transaction that wrote them. */
export type PassagesWritten = (
  executor: Parameters<JobQueue['enqueue']>[0],
  tenantId: string,
  documentIds: string[],
) => Promise<void>;

export interface SemanticRetrieval {
  /** Undefined when no embeddings model is configured: documents then queue nothing. */
  passagesWritten: PassagesWritten | undefined;
  /**
   * The question's embedding for retrieval; undefined without embeddings, for a blank question,
   * and when the server fails or takes longer than `timeoutMs` (retrieval is then lexical).
   */
  embedQuestion(question: string, timeoutMs: number): Promise<QuestionEmbedding | undefined>;
}

/** Registers the embedding job when embeddings are configured. */
export function createSemanticRetrieval(deps: {
  db: Db;
  jobs: JobQueue;
  config: EmbeddingsConfig;
  onError?: (error: EmbeddingsError) => void;
}): SemanticRetrieval {
  const client = embeddingsClientFromConfig(deps.config);
  if (client) registerEmbeddingJob(deps.jobs, { db: deps.db, client });
  return {
    passagesWritten: client
      ? (executor, tenantId, documentIds) => enqueueEmbedding(deps.jobs, executor, tenantId, documentIds)
      : undefined,
    async embedQuestion(question, timeoutMs) {
      if (!client) return undefined;
      const signal = AbortSignal.timeout(timeoutMs);
      const vector = await questionVector(
        { embeddings: client, signal, ...(deps.onError ? { onError: deps.onError } : {}) },
        question,
      );
      return vector ? { vector, model: client.model } : undefined;
    },
  };
}
