// The record of a knowledge update request (a knowledge gap), as its response schema with the
// type derived from it; its row as read; and the refusal of a status change its state does not allow.
import { type Static, Type } from '@sinclair/typebox';
import type { Db, KnowledgeUpdateRequestStatus } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

export const KNOWLEDGE_UPDATE_REQUEST_STATUSES = ['open', 'approved', 'rejected', 'applied', 'resolved'] as const;

/** A request's status, with its transitions. */
export const RequestStatus = Type.Union(
  KNOWLEDGE_UPDATE_REQUEST_STATUSES.map((status) => Type.Literal(status)),
  {
    description:
      '`open` → `approved` | `rejected` (review); `approved` → `applied` (apply); ' +
      '`open` | `approved` | `rejected` → `resolved`. `applied` and `resolved` are final.',
  },
);

export const KnowledgeUpdateRequestRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('knowledge_update_request'),
    question: Type.String(),
    status: RequestStatus,
    occurrences: Type.Integer({ description: 'How often the question was asked while the request was open.' }),
    conversation_id: Nullable(Uuid),
    message_id: Nullable(Uuid),
    proposed_answer: Nullable(Type.String()),
    review_note: Nullable(Type.String()),
    document_id: Nullable(Uuid),
    reviewed_at: Nullable(Timestamp),
    applied_at: Nullable(Timestamp),
    resolved_at: Nullable(Timestamp),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'KnowledgeUpdateRequest' },
);
export type KnowledgeUpdateRequestRecord = Static<typeof KnowledgeUpdateRequestRecord>;

export type GapRow = {
  id: string;
  question: string;
  status: KnowledgeUpdateRequestStatus;
  occurrences: number;
  conversation_id: string | null;
  message_id: string | null;
  proposed_answer: string | null;
  review_note: string | null;
  document_id: string | null;
  reviewed_at: Date | null;
  applied_at: Date | null;
  resolved_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

export const GAP_COLUMNS = [
  'id',
  'question',
  'status',
  'occurrences',
  'conversation_id',
  'message_id',
  'proposed_answer',
  'review_note',
  'document_id',
  'reviewed_at',
  'applied_at',
  'resolved_at',
  'created_at',
  'updated_at',
] as const;

export const toGapRecord = (row: GapRow): KnowledgeUpdateRequestRecord => ({
  id: row.id,
  object: 'knowledge_update_request',
  question: row.question,
  status: row.status,
  occurrences: Number(row.occurrences),
  conversation_id: row.conversation_id,
  message_id: row.message_id,
  proposed_answer: row.proposed_answer,
  review_note: row.review_note,
  document_id: row.document_id,
  reviewed_at: iso(row.reviewed_at),
  applied_at: iso(row.applied_at),
  resolved_at: iso(row.resolved_at),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export async function loadGap(db: Db, tenantId: string, id: string): Promise<GapRow> {
  const row = await db
    .selectFrom('knowledge_update_requests')
    .select(GAP_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('knowledge update request', id);
  return row;
}

export function illegalTransition(from: KnowledgeUpdateRequestStatus, to: KnowledgeUpdateRequestStatus): ConflictError {
  return new ConflictError(`The knowledge update request is ${from}; it cannot become ${to}.`);
}
