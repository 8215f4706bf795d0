// Applying a knowledge update request: its proposed answer written into a document, and the
// request marked applied, in one transaction.
import { sql, type Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import { cutText } from '../../lib/text.js';
import { MissingParameterError, NotFoundError, ValidationError } from '../errors.js';
import type { DocumentService } from './documents.js';
import {
  GAP_COLUMNS,
  type GapRow,
  illegalTransition,
  type KnowledgeUpdateRequestRecord,
  toGapRecord,
} from './gaps-records.js';

export interface ApplyInput {
  proposed_answer?: string | undefined;
  /** Append to this document instead of creating one. */
  document_id?: string | undefined;
  title?: string | undefined;
  language?: string | undefined;
}

const TITLE_MAX = 200;

/**
 * approved → applied: writes the proposed answer into a document — appended to `document_id`
 * (the request's or the one sent) as a section headed by the question, or a new document
 * titled with the question. The document write and the status change happen together.
 */
export async function applyGap(
  { db, documents }: { db: Db; documents: DocumentService },
  tenantId: string,
  id: string,
  input: ApplyInput,
): Promise<KnowledgeUpdateRequestRecord> {
  return db.transaction().execute(async (trx) => {
    const request = await trx
      .selectFrom('knowledge_update_requests')
      .select(GAP_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!request) throw new NotFoundError('knowledge update request', id);
    if (request.status !== 'approved') throw illegalTransition(request.status, 'applied');
    const answer = answerToApply(request, input);
    const documentId = await writeAnswer(documents, trx, tenantId, request, input, answer);
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
      .returning(GAP_COLUMNS)
      .executeTakeFirstOrThrow();
    return toGapRecord(row);
  });
}

/** The answer sent, else the request's: neither blank nor missing. */
function answerToApply(request: GapRow, input: ApplyInput): string {
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
  return answer;
}

/** The id of the document the answer went into: the one named (a section appended), or a new one. */
async function writeAnswer(
  documents: DocumentService,
  trx: Transaction<Database>,
  tenantId: string,
  request: GapRow,
  input: ApplyInput,
  answer: string,
): Promise<string> {
  const targetId = input.document_id ?? request.document_id ?? undefined;
  if (targetId !== undefined) {
    return (await documents.appendSection(trx, tenantId, targetId, request.question, answer)).id;
  }
  const title = input.title ?? cutText(request.question, TITLE_MAX);
  const created = await documents.insertDocument(trx, tenantId, {
    title,
    content: answer,
    ...(input.language !== undefined ? { language: input.language } : {}),
  });
  return created.id;
}
