// Review of a knowledge update request: approved or rejected while open, or closed as resolved.
// A status change the request's state does not allow is a conflict.
import { sql } from 'kysely';
import type { Db, KnowledgeUpdateRequestStatus } from '../../db/index.js';
import {
  GAP_COLUMNS,
  illegalTransition,
  type KnowledgeUpdateRequestRecord,
  loadGap,
  toGapRecord,
} from './gaps-records.js';

export interface ReviewInput {
  decision: 'approve' | 'reject';
  note?: string | undefined;
  proposed_answer?: string | undefined;
}

/** open → approved | rejected, with an optional note and proposed answer. */
export function reviewGap(db: Db, tenantId: string, id: string, input: ReviewInput) {
  return transition(db, tenantId, id, ['open'], input.decision === 'approve' ? 'approved' : 'rejected', {
    reviewed_at: sql`now()`,
    ...(input.note !== undefined ? { review_note: input.note } : {}),
    ...(input.proposed_answer !== undefined ? { proposed_answer: input.proposed_answer } : {}),
  });
}

/** open | approved | rejected → resolved. */
export function resolveGap(db: Db, tenantId: string, id: string) {
  return transition(db, tenantId, id, ['open', 'approved', 'rejected'], 'resolved', { resolved_at: sql`now()` });
}

/** Moves a request from one of `from` to `to`, atomically; a request in another state is a conflict. */
async function transition(
  db: Db,
  tenantId: string,
  id: string,
  from: readonly KnowledgeUpdateRequestStatus[],
  to: KnowledgeUpdateRequestStatus,
  set: Record<string, unknown>,
): Promise<KnowledgeUpdateRequestRecord> {
  const row = await db
    .updateTable('knowledge_update_requests')
    .set({ ...set, status: to, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('status', 'in', from)
    .returning(GAP_COLUMNS)
    .executeTakeFirst();
  if (row) return toGapRecord(row);
  const current = await loadGap(db, tenantId, id);
  throw illegalTransition(current.status, to);
}
