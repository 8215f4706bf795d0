// The records of coverage evaluations: a run (its status, progress and per-domain results), one
// judged question, and the latest coverage of a workspace; and the run's row as it is read.
import type { Db } from '../../db/client.js';
import type { CoverageDomainResult, CoverageRunStatus } from '../../db/schema.js';
import { iso } from '../../lib/time.js';

export interface Percentages {
  covered: number;
  total: number;
  /** covered / total × 100, one decimal; null when there is no question. */
  percentage: number | null;
}

export interface EvaluationRecord extends Percentages {
  id: string;
  object: 'coverage_evaluation';
  referential_id: string;
  status: CoverageRunStatus;
  method: 'rank_threshold' | 'llm_judge';
  threshold: number;
  processed: number;
  domains: CoverageDomainResult[];
  error: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
}

export interface CoverageRecord {
  object: 'coverage';
  /** False until a run of the tenant (or of the asked referential) has completed. */
  has_evaluation: boolean;
  evaluation_id: string | null;
  referential_id: string | null;
  completed_at: string | null;
  method: 'rank_threshold' | 'llm_judge' | null;
  domains: CoverageDomainResult[];
  overall: Percentages | null;
}

export interface ResultRecord {
  object: 'coverage_result';
  question_id: string;
  question: string;
  domain: string;
  covered: boolean;
  best_rank: number | null;
  document_id: string | null;
}

export const percentage = (covered: number, total: number): number | null =>
  total === 0 ? null : Math.round((covered / total) * 1000) / 10;

export type EvaluationRow = {
  id: string;
  referential_id: string;
  status: CoverageRunStatus;
  method: 'rank_threshold' | 'llm_judge';
  threshold: number;
  total_questions: number;
  processed_questions: number;
  covered_questions: number;
  domains: CoverageDomainResult[];
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
};

export const toEvaluation = (row: EvaluationRow): EvaluationRecord => ({
  id: row.id,
  object: 'coverage_evaluation',
  referential_id: row.referential_id,
  status: row.status,
  method: row.method,
  threshold: Number(row.threshold),
  processed: row.processed_questions,
  covered: row.covered_questions,
  total: row.total_questions,
  percentage: row.status === 'completed' ? percentage(row.covered_questions, row.total_questions) : null,
  domains: row.domains,
  error: row.error,
  created_at: iso(row.created_at),
  started_at: iso(row.started_at),
  completed_at: iso(row.completed_at),
});

export const EVALUATION_COLUMNS = [
  'id',
  'referential_id',
  'status',
  'method',
  'threshold',
  'total_questions',
  'processed_questions',
  'covered_questions',
  'domains',
  'error',
  'created_at',
  'started_at',
  'completed_at',
] as const;

export async function getEvaluationRow(db: Db, tenantId: string, id: string): Promise<EvaluationRow | undefined> {
  return (await db
    .selectFrom('coverage_evaluations')
    .select(EVALUATION_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst()) as EvaluationRow | undefined;
}
