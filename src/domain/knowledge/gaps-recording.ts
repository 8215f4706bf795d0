// Recording a knowledge gap: the question the agent could not answer becomes one more occurrence
// of the open request for it, or a new `open` request.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { MissingParameterError } from '../errors.js';
import type { EmitEvent } from '../webhooks/events.js';
import { GAP_COLUMNS, type GapRow, type KnowledgeUpdateRequestRecord, toGapRecord } from './gaps-records.js';

export interface RecordGapInput {
  question: string;
  conversation_id?: string | null;
  message_id?: string | null;
  proposed_answer?: string | null;
}

const normalizeQuestion = (question: string) => question.trim().replace(/\s+/g, ' ');

/**
 * Records a question the agent could not answer: one more occurrence of the open request for
 * it (the same question, ignoring case and spacing), or a new `open` request. Recordings of one
 * question are serialized (a transaction-scoped advisory lock on it), so the same question
 * asked in several conversations at once still makes one request.
 */
export async function recordGap(
  { db, emitEvent }: { db: Db; emitEvent?: EmitEvent | undefined },
  tenantId: string,
  input: RecordGapInput,
): Promise<KnowledgeUpdateRequestRecord> {
  const question = normalizeQuestion(input.question);
  if (question === '') throw new MissingParameterError('question');
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`gap\n${tenantId}\n${question.toLowerCase()}`}, 0))`.execute(
      trx,
    );
    const existing = await askedAgain(trx, tenantId, question, input);
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
        .returning(GAP_COLUMNS)
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
    const record = toGapRecord(row);
    // A new request and its webhook event commit together.
    if (!existing) {
      await emitEvent?.(trx, tenantId, 'knowledge_update_request.created', { knowledge_update_request: record });
    }
    return record;
  });
}

/** The open request for the question, one occurrence more (and its answer, if it had none); or undefined. */
function askedAgain(trx: Db, tenantId: string, question: string, input: RecordGapInput): Promise<GapRow | undefined> {
  return trx
    .updateTable('knowledge_update_requests')
    .set((eb) => ({
      occurrences: eb('occurrences', '+', 1),
      updated_at: sql`now()`,
      proposed_answer: eb.fn.coalesce('proposed_answer', sql.val(input.proposed_answer ?? null)),
    }))
    .where('tenant_id', '=', tenantId)
    .where('status', '=', 'open')
    .where(sql`lower(question)`, '=', question.toLowerCase())
    .returning(GAP_COLUMNS)
    .executeTakeFirst();
}
