// Knowledge coverage (DESIGN.md §7; docs/coverage-and-analytics.md): referentials and their
// questions, evaluation runs over the agent's retrieval, and question extraction from
// conversations. The two kinds of run register their job handlers on the queue they are given.
import type { Db } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { RetrieveFn } from './evaluation-run.js';
import { createEvaluationService } from './evaluations.js';
import { createExtractionService } from './extraction.js';
import type { CoverageJudge } from './judge.js';
import { createReferentialService } from './referentials.js';

export interface CoverageServiceDeps {
  db: Db;
  jobs: JobQueue;
  /** The agent's retrieval (the engine's `retrieve`): what a customer turn would find. */
  retrieve: RetrieveFn;
  /** The rank threshold that retrieval applies, reported on each evaluation. */
  threshold: number;
  /** Present when an LLM is configured: it decides whether found passages answer a question. */
  judge?: CoverageJudge | undefined;
  extractionBatchSize?: number;
  /** Webhook events: `coverage.evaluation.completed`. */
  emitEvent?: EmitEvent | undefined;
}

export function createCoverageService(deps: CoverageServiceDeps) {
  return {
    ...createReferentialService({ db: deps.db }),
    ...createEvaluationService(deps),
    ...createExtractionService({
      db: deps.db,
      jobs: deps.jobs,
      ...(deps.extractionBatchSize !== undefined ? { batchSize: deps.extractionBatchSize } : {}),
    }),
  };
}

export type CoverageService = ReturnType<typeof createCoverageService>;
