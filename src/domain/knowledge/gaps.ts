// Knowledge update requests (knowledge gaps): questions the agent could not answer from the
// tenant's knowledge (DESIGN.md §8, rule 4), reviewed by people and applied as documents.
//
// Statuses and transitions (an illegal one answers 409 `conflict`):
//   open      → approved | rejected   (review)
//   approved  → applied               (apply: writes the proposed answer into a document)
//   open | approved | rejected → resolved   (resolve: closed without a change through this request)
//   applied and resolved are final.
// The same question asked again while an open request holds it (case and spacing aside) adds an
// occurrence to that request instead of opening another. Recording is in gaps-recording.ts,
// review and resolve in gaps-review.ts, apply in gaps-apply.ts.
import type { Db, KnowledgeUpdateRequestStatus } from '../../db/index.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { DocumentService } from './documents.js';
import { type ApplyInput, applyGap } from './gaps-apply.js';
import { type RecordGapInput, recordGap } from './gaps-recording.js';
import { GAP_COLUMNS, type KnowledgeUpdateRequestRecord, loadGap, toGapRecord } from './gaps-records.js';
import { type ReviewInput, resolveGap, reviewGap } from './gaps-review.js';

export type { ApplyInput } from './gaps-apply.js';
export type { RecordGapInput } from './gaps-recording.js';
export { KNOWLEDGE_UPDATE_REQUEST_STATUSES, type KnowledgeUpdateRequestRecord } from './gaps-records.js';
export type { ReviewInput } from './gaps-review.js';

export function createKnowledgeGapService(deps: { db: Db; documents: DocumentService; emitEvent?: EmitEvent }) {
  const { db } = deps;
  return {
    recordGap: (tenantId: string, input: RecordGapInput) => recordGap(deps, tenantId, input),
    list: (tenantId: string, page: Page & { status?: KnowledgeUpdateRequestStatus | undefined }) =>
      listGaps(db, tenantId, page),
    get: async (tenantId: string, id: string): Promise<KnowledgeUpdateRequestRecord> =>
      toGapRecord(await loadGap(db, tenantId, id)),
    review: (tenantId: string, id: string, input: ReviewInput) => reviewGap(db, tenantId, id, input),
    resolve: (tenantId: string, id: string) => resolveGap(db, tenantId, id),
    apply: (tenantId: string, id: string, input: ApplyInput) => applyGap(deps, tenantId, id, input),
  };
}

export type KnowledgeGapService = ReturnType<typeof createKnowledgeGapService>;

async function listGaps(db: Db, tenantId: string, page: Page & { status?: KnowledgeUpdateRequestStatus | undefined }) {
  let query = db.selectFrom('knowledge_update_requests').select(GAP_COLUMNS).where('tenant_id', '=', tenantId);
  if (page.status) query = query.where('status', '=', page.status);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toGapRecord, (row) => row.id);
}
