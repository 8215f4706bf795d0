// Coverage evaluations (DESIGN.md §7, §8): a run puts every reference question of a referential
// to the agent's own retrieval (the engine's `retrieve`, the function a customer turn uses) and
// records whether the knowledge answers it:
// - built-in rule: covered when retrieval returns a passage at or above the agent's rank
//   threshold (the threshold the engine answers at; below it the agent records a knowledge gap);
// - with an LLM configured: a question with such passages is covered when the model, shown the
//   question and its best passages, says they answer it; without passages it is not covered.
// Runs go through the durable job queue (the job is in evaluation-run.ts). Judged questions are
// stored in batches, so progress is readable while the run goes and a retried job resumes after
// the questions already judged. `GET /coverage` reads the latest completed run.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { decodeIdCursor, type List, newestFirst, type Page, toList } from '../pagination.js';
import {
  type CoverageRecord,
  EVALUATION_COLUMNS,
  type EvaluationRecord,
  type EvaluationRow,
  getEvaluationRow,
  percentage,
  type ResultRecord,
  toEvaluation,
} from './evaluation-records.js';
import { COVERAGE_EVALUATION_JOB, type EvaluationRunDeps, registerEvaluationJob } from './evaluation-run.js';
import { requireReferential } from './referential-checks.js';

export interface EvaluationServiceDeps extends EvaluationRunDeps {
  jobs: JobQueue;
  /** The rank threshold the agent answers at, reported on each run. */
  threshold: number;
}

export function createEvaluationService(deps: EvaluationServiceDeps) {
  const { db } = deps;
  registerEvaluationJob(deps.jobs, deps);
  return {
    startEvaluation: (tenantId: string, input: { referential_id: string }) => startEvaluation(deps, tenantId, input),
    getEvaluation: (tenantId: string, id: string) => getEvaluation(db, tenantId, id),
    listEvaluations: (tenantId: string, page: Page) => listEvaluations(db, tenantId, page),
    listResults: (tenantId: string, id: string, page: Page & { covered?: boolean | undefined }) =>
      listResults(db, tenantId, id, page),
    latestCoverage: (tenantId: string, options: { referential_id?: string | undefined } = {}) =>
      latestCoverage(db, tenantId, options),
  };
}

export type EvaluationService = ReturnType<typeof createEvaluationService>;

/** Records a queued run of every question the referential has now, and enqueues its job. */
async function startEvaluation(
  { db, jobs, judge, threshold }: EvaluationServiceDeps,
  tenantId: string,
  input: { referential_id: string },
): Promise<EvaluationRecord> {
  return db.transaction().execute(async (trx) => {
    const referentialId = await requireReferential(trx, tenantId, input.referential_id, { from: 'body' });
    const total = await trx
      .selectFrom('coverage_questions')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('tenant_id', '=', tenantId)
      .where('referential_id', '=', referentialId)
      .executeTakeFirstOrThrow();
    const row = (await trx
      .insertInto('coverage_evaluations')
      .values({
        id: newId(),
        tenant_id: tenantId,
        referential_id: referentialId,
        method: judge ? 'llm_judge' : 'rank_threshold',
        threshold,
        total_questions: Number(total.n),
      })
      .returning(EVALUATION_COLUMNS)
      .executeTakeFirstOrThrow()) as EvaluationRow;
    await jobs.enqueue(trx, {
      kind: COVERAGE_EVALUATION_JOB,
      tenantId,
      payload: { evaluation_id: row.id },
      maxAttempts: 3,
    });
    return toEvaluation(row);
  });
}

async function getEvaluation(db: Db, tenantId: string, id: string): Promise<EvaluationRecord> {
  const row = await getEvaluationRow(db, tenantId, id);
  if (!row) throw new NotFoundError('evaluation', id);
  return toEvaluation(row);
}

async function listEvaluations(db: Db, tenantId: string, page: Page): Promise<List<EvaluationRecord>> {
  let query = db.selectFrom('coverage_evaluations').select(EVALUATION_COLUMNS).where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  return toList((await query.execute()) as EvaluationRow[], page, toEvaluation, (row) => row.id);
}

/** Per-question results of a run, in question order (cursor: the last question id). */
async function listResults(
  db: Db,
  tenantId: string,
  id: string,
  page: Page & { covered?: boolean | undefined },
): Promise<List<ResultRecord>> {
  if (!(await getEvaluationRow(db, tenantId, id))) throw new NotFoundError('evaluation', id);
  let query = db
    .selectFrom('coverage_results')
    .select(['question_id', 'question', 'domain', 'covered', 'best_rank', 'document_id'])
    .where('tenant_id', '=', tenantId)
    .where('evaluation_id', '=', id)
    .orderBy('question_id')
    .limit(page.limit + 1);
  if (page.covered !== undefined) query = query.where('covered', '=', page.covered);
  const after = decodeIdCursor(page.cursor);
  if (after) query = query.where('question_id', '>', after);
  return toList(
    await query.execute(),
    page,
    (row): ResultRecord => ({
      object: 'coverage_result',
      question_id: row.question_id,
      question: row.question,
      domain: row.domain,
      covered: row.covered,
      best_rank: row.best_rank === null ? null : Number(row.best_rank),
      document_id: row.document_id,
    }),
    (row) => row.question_id,
  );
}

/** Per-domain percentages of the latest completed run (of the referential, when named). */
async function latestCoverage(
  db: Db,
  tenantId: string,
  options: { referential_id?: string | undefined },
): Promise<CoverageRecord> {
  let query = db
    .selectFrom('coverage_evaluations')
    .select(EVALUATION_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('status', '=', 'completed')
    .orderBy('completed_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1);
  if (options.referential_id !== undefined) query = query.where('referential_id', '=', options.referential_id);
  const row = (await query.executeTakeFirst()) as EvaluationRow | undefined;
  if (!row) {
    return {
      object: 'coverage',
      has_evaluation: false,
      evaluation_id: null,
      referential_id: options.referential_id ?? null,
      completed_at: null,
      method: null,
      domains: [],
      overall: null,
    };
  }
  return {
    object: 'coverage',
    has_evaluation: true,
    evaluation_id: row.id,
    referential_id: row.referential_id,
    completed_at: iso(row.completed_at),
    method: row.method,
    domains: row.domains,
    overall: {
      covered: row.covered_questions,
      total: row.total_questions,
      percentage: percentage(row.covered_questions, row.total_questions),
    },
  };
}
