// Knowledge update requests (knowledge gaps): questions the agent could not answer from the
// tenant's knowledge (DESIGN.md §8, rule 4), reviewed by people and applied as documents.
//
// Statuses and transitions (an illegal one answers 409 `conflict`):
//   open      → approved | rejected   (review)
//   approved  → applied               (apply: writes the proposed answer into a document)
//   open | approved | rejected → resolved   (resolve: closed without a change through this request)
//   applied and resolved are final.
// The same question asked again while an open request holds it (case and spacing aside) adds an
// occurrence to that request instead of opening another.
import { sql } from 'kysely';
import type { Db } from '../../db/client.js';
import type { KnowledgeUpdateRequestStatus } from '../../db/schema.js';
import { newId } from '../../lib/ids.js';
import { cutText } from '../../lib/text.js';
import { iso } from '../../lib/time.js';
import { ConflictError, MissingParameterError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { DocumentService } from './documents.js';

export const KNOWLEDGE_UPDATE_REQUEST_STATUSES = ['open', 'approved', 'rejected', 'applied', 'resolved'] as const;

export interface KnowledgeUpdateRequestRecord {
  id: string;
  object: 'knowledge_update_request';
  question: string;
  status: KnowledgeUpdateRequestStatus;
  occurrences: number;
  conversation_id: string | null;
  message_id: string | null;
  proposed_answer: string | null;
  review_note: string | null;
  document_id: string | null;
  reviewed_at: string | null;
  applied_at: string | null;
  resolved_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface RecordGapInput {
  question: string;
  conversation_id?: string | null;
  message_id?: string | null;
  proposed_answer?: string | null;
}

export interface ReviewInput {
  decision: 'approve' | 'reject';
  note?: string | undefined;
  proposed_answer?: string | undefined;
}

export interface ApplyInput {
  proposed_answer?: string | undefined;
  /** Append to this document instead of creating one. */
  document_id?: string | undefined;
  title?: string | undefined;
  language?: string | undefined;
}

type Row = {
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

const COLUMNS = [
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

const toRecord = (row: Row): KnowledgeUpdateRequestRecord => ({
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

const normalizeQuestion = (question: string) => question.trim().replace(/\s+/g, ' ');
const TITLE_MAX = 200;

export function createKnowledgeGapService({
  db,
  documents,
  emitEvent,
}: {
  db: Db;
  documents: DocumentService;
  emitEvent?: EmitEvent;
}) {
  async function load(tenantId: string, id: string): Promise<Row> {
    const row = await db
      .selectFrom('knowledge_update_requests')
      .select(COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw new NotFoundError('knowledge update request', id);
    return row;
  }

  /** Moves a request from one of `from` to `to`, atomically; a request in another state is a conflict. */
  async function transition(
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
      .returning(COLUMNS)
      .executeTakeFirst();
    if (row) return toRecord(row);
    const current = await load(tenantId, id);
    throw illegal(current.status, to);
  }

  return {
    /**
     * Records a question the agent could not answer: one more occurrence of the open request for
     * it (the same question, ignoring case and spacing), or a new `open` request. Recordings of one
     * question are serialized (a transaction-scoped advisory lock on it), so the same question
     * asked in several conversations at once still makes one request.
     */
    async recordGap(tenantId: string, input: RecordGapInput): Promise<KnowledgeUpdateRequestRecord> {
      const question = normalizeQuestion(input.question);
      if (question === '') throw new MissingParameterError('question');
      return db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtextextended(${`gap\n${tenantId}\n${question.toLowerCase()}`}, 0))`.execute(
          trx,
        );
        const existing = await trx
          .updateTable('knowledge_update_requests')
          .set((eb) => ({
            occurrences: eb('occurrences', '+', 1),
            updated_at: sql`now()`,
            proposed_answer: eb.fn.coalesce('proposed_answer', sql.val(input.proposed_answer ?? null)),
          }))
          .where('tenant_id', '=', tenantId)
          .where('status', '=', 'open')
          .where(sql`lower(question)`, '=', question.toLowerCase())
          .returning(COLUMNS)
          .executeTakeFirst();
        const row =
          existing ??
          (await trx
            .insertInto('knowledge_update_requests')
            .values({
              id: newId(),
              tenant_id: tenantId,
              question,
              conversation_id: input.conversation_id ?? null,
              message_id: input.message_id ?? null,
              proposed_answer: input.proposed_answer ?? null,
            })
            .returning(COLUMNS)
            .executeTakeFirstOrThrow());
        // Each asking is kept, with its conversation: analytics tells answered conversations by it.
        await trx
          .insertInto('knowledge_gap_occurrences')
          .values({
            tenant_id: tenantId,
            request_id: row.id,
            conversation_id: input.conversation_id ?? null,
            message_id: input.message_id ?? null,
          })
          .execute();
        const record = toRecord(row);
        // A new request and its webhook event commit together.
        if (!existing) {
          await emitEvent?.(trx, tenantId, 'knowledge_update_request.created', { knowledge_update_request: record });
        }
        return record;
      });
    },

    async list(tenantId: string, page: Page & { status?: KnowledgeUpdateRequestStatus | undefined }) {
      let query = db.selectFrom('knowledge_update_requests').select(COLUMNS).where('tenant_id', '=', tenantId);
      if (page.status) query = query.where('status', '=', page.status);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toRecord, (row) => row.id);
    },

    async get(tenantId: string, id: string): Promise<KnowledgeUpdateRequestRecord> {
      return toRecord(await load(tenantId, id));
    },

    /** open → approved | rejected, with an optional note and proposed answer. */
    async review(tenantId: string, id: string, input: ReviewInput): Promise<KnowledgeUpdateRequestRecord> {
      return transition(tenantId, id, ['open'], input.decision === 'approve' ? 'approved' : 'rejected', {
        reviewed_at: sql`now()`,
        ...(input.note !== undefined ? { review_note: input.note } : {}),
        ...(input.proposed_answer !== undefined ? { proposed_answer: input.proposed_answer } : {}),
      });
    },

    /** open | approved | rejected → resolved. */
    async resolve(tenantId: string, id: string): Promise<KnowledgeUpdateRequestRecord> {
      return transition(tenantId, id, ['open', 'approved', 'rejected'], 'resolved', { resolved_at: sql`now()` });
    },

    /**
     * approved → applied: writes the proposed answer into a document — appended to `document_id`
     * (the request's or the one sent) as a section headed by the question, or a new document
     * titled with the question. The document write and the status change happen together.
     */
    async apply(tenantId: string, id: string, input: ApplyInput): Promise<KnowledgeUpdateRequestRecord> {
      return db.transaction().execute(async (trx) => {
        const request = await trx
          .selectFrom('knowledge_update_requests')
          .select(COLUMNS)
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .forUpdate()
          .executeTakeFirst();
        if (!request) throw new NotFoundError('knowledge update request', id);
        if (request.status !== 'approved') throw illegal(request.status, 'applied');
        if (input.proposed_answer !== undefined && input.proposed_answer.trim() === '') {
          throw new ValidationError('proposed_answer', 'proposed_answer must not be blank.');
        }
        const answer = (input.proposed_answer ?? request.proposed_answer ?? '').trim();
        if (answer === '') {
          throw new MissingParameterError(
            'proposed_answer',
            'This request has no proposed answer: send proposed_answer, or review it with one.',
          );
        }
        const targetId = input.document_id ?? request.document_id ?? undefined;
        let documentId: string;
        if (targetId !== undefined) {
          documentId = (await documents.appendSection(trx, tenantId, targetId, request.question, answer)).id;
        } else {
          const title = input.title ?? cutText(request.question, TITLE_MAX);
          const created = await documents.insertDocument(trx, tenantId, {
            title,
            content: answer,
            ...(input.language !== undefined ? { language: input.language } : {}),
          });
          documentId = created.id;
        }
        const row = await trx
          .updateTable('knowledge_update_requests')
          .set({
            status: 'applied',
            proposed_answer: answer,
            document_id: documentId,
            applied_at: sql`now()`,
            updated_at: sql`now()`,
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .returning(COLUMNS)
          .executeTakeFirstOrThrow();
        return toRecord(row);
      });
    },
  };
}

function illegal(from: KnowledgeUpdateRequestStatus, to: KnowledgeUpdateRequestStatus): ConflictError {
  return new ConflictError(`The knowledge update request is ${from}; it cannot become ${to}.`);
}

export type KnowledgeGapService = ReturnType<typeof createKnowledgeGapService>;
