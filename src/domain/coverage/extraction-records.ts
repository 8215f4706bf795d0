// The record of a question-extraction run: its status and live progress, as its response schema
// with the type derived from it, and as read from its row.
import { type Static, Type } from '@sinclair/typebox';
import type { CoverageRunStatus } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { Nullable, StringEnum, Timestamp, Uuid } from '../shapes.js';

export const ExtractionRecord = Type.Object(
  {
    object: Type.Literal('question_extraction'),
    id: Nullable(Uuid),
    referential_id: Nullable(Uuid),
    status: StringEnum(
      ['never_run', 'queued', 'running', 'completed', 'failed'],
      'never_run: the workspace has no extraction yet.',
    ),
    total_conversations: Type.Integer({ description: 'Conversations started before the run was requested.' }),
    processed_conversations: Type.Integer(),
    questions_found: Type.Integer({ description: 'Customer questions read, before near-duplicates are dropped.' }),
    questions_added: Type.Integer({ description: 'Questions added to the referential.' }),
    percent: Type.Number({ description: 'processed / total × 100, one decimal; 100 once completed.' }),
    error: Nullable(Type.String()),
    created_at: Nullable(Timestamp),
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
  },
  { title: 'QuestionExtraction' },
);
export type ExtractionRecord = Static<typeof ExtractionRecord>;

export type ExtractionRow = {
  id: string;
  referential_id: string;
  status: CoverageRunStatus;
  total_conversations: number;
  processed_conversations: number;
  questions_found: number;
  questions_added: number;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
};

export const EXTRACTION_COLUMNS = [
  'id',
  'referential_id',
  'status',
  'total_conversations',
  'processed_conversations',
  'questions_found',
  'questions_added',
  'error',
  'created_at',
  'started_at',
  'finished_at',
] as const;

export function toExtraction(row: ExtractionRow): ExtractionRecord {
  const total = row.total_conversations;
  const done = row.status === 'completed';
  return {
    object: 'question_extraction',
    id: row.id,
    referential_id: row.referential_id,
    status: row.status,
    total_conversations: total,
    processed_conversations: row.processed_conversations,
    questions_found: row.questions_found,
    questions_added: row.questions_added,
    percent:
      done || total === 0
        ? done
          ? 100
          : 0
        : Math.min(100, Math.floor((row.processed_conversations / total) * 1000) / 10),
    error: row.error,
    created_at: iso(row.created_at),
    started_at: iso(row.started_at),
    finished_at: iso(row.finished_at),
  };
}

export const NEVER_RUN: ExtractionRecord = {
  object: 'question_extraction',
  id: null,
  referential_id: null,
  status: 'never_run',
  total_conversations: 0,
  processed_conversations: 0,
  questions_found: 0,
  questions_added: 0,
  percent: 0,
  error: null,
  created_at: null,
  started_at: null,
  finished_at: null,
};
