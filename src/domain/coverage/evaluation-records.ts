// The records of coverage evaluations: a run (its status, progress and per-domain results), one
// judged question, and the latest coverage of a workspace, as their response schemas with the
// types derived from them; and the run's row as it is read.
import { type Static, Type } from '@sinclair/typebox';
import type { CoverageDomainResult, CoverageRunStatus, Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { Nullable, StringEnum, Timestamp, Uuid } from '../shapes.js';

const DomainResult = Type.Object({
  domain: Type.String(),
  covered: Type.Integer(),
  total: Type.Integer(),
  percentage: Nullable(Type.Number({ description: 'covered / total × 100, one decimal.' })),
});

const Method = StringEnum(
  ['rank_threshold', 'llm_judge'],
  'rank_threshold: covered when retrieval finds a passage at or above the threshold. llm_judge: the configured model also confirms the passages answer it.',
);

export const EvaluationRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('coverage_evaluation'),
    referential_id: Uuid,
    status: StringEnum(['queued', 'running', 'completed', 'failed']),
    method: Method,
    threshold: Type.Number({ description: 'The rank threshold of the agent retrieval used.' }),
    processed: Type.Integer({ description: 'Questions judged so far.' }),
    covered: Type.Integer(),
    total: Type.Integer(),
    percentage: Nullable(Type.Number({ description: 'Once completed: covered / total × 100, one decimal.' })),
    domains: Type.Array(DomainResult, { description: 'Once completed: results per domain, by name.' }),
    error: Nullable(Type.String()),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
  },
  { title: 'CoverageEvaluation' },
);
export type EvaluationRecord = Static<typeof EvaluationRecord>;

export const ResultRecord = Type.Object(
  {
    object: Type.Literal('coverage_result'),
    question_id: Uuid,
    question: Type.String(),
    domain: Type.String(),
    covered: Type.Boolean(),
    best_rank: Nullable(Type.Number({ description: 'Rank of the best passage retrieval found, if any.' })),
    document_id: Nullable(Uuid),
  },
  { title: 'CoverageResult' },
);
export type ResultRecord = Static<typeof ResultRecord>;

export const CoverageRecord = Type.Object(
  {
    object: Type.Literal('coverage'),
    has_evaluation: Type.Boolean({ description: 'False until an evaluation has completed; the lists are then empty.' }),
    evaluation_id: Nullable(Uuid),
    referential_id: Nullable(Uuid),
    completed_at: Nullable(Timestamp),
    method: Nullable(Method),
    domains: Type.Array(DomainResult),
    overall: Nullable(
      Type.Object({ covered: Type.Integer(), total: Type.Integer(), percentage: Nullable(Type.Number()) }),
    ),
  },
  { title: 'Coverage' },
);
export type CoverageRecord = Static<typeof CoverageRecord>;

/** covered / total × 100, one decimal; null when there is no question. */
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
