// Message feedback: a rating, and perhaps a comment, on one of the agent's messages.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { Nullable, StringEnum, Timestamp, Uuid } from '../shapes.js';
import { findMessage } from './messages.js';

export const FeedbackRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('message_feedback'),
    message_id: Uuid,
    conversation_id: Uuid,
    rating: StringEnum(['positive', 'negative']),
    comment: Nullable(Type.String()),
    created_at: Timestamp,
  },
  { title: 'MessageFeedback' },
);
export type FeedbackRecord = Static<typeof FeedbackRecord>;

export interface NewFeedback {
  rating: 'positive' | 'negative';
  comment?: string | undefined;
}

/** Feedback on an agent's message; each call records one. */
export async function createFeedback(
  db: Db,
  tenantId: string,
  messageId: string,
  input: NewFeedback,
): Promise<FeedbackRecord> {
  const message = await findMessage(db, tenantId, messageId);
  if (!message) throw new NotFoundError('message', messageId);
  if (message.author !== 'agent') {
    throw new ConflictError('Feedback applies to the agent’s messages; this message was not written by the agent.');
  }
  if (input.comment !== undefined && input.comment.trim() === '') {
    throw new ValidationError('comment', 'comment must not be blank.');
  }
  const row = await db
    .insertInto('message_feedback')
    .values({
      id: newId(),
      tenant_id: tenantId,
      conversation_id: message.conversation_id,
      message_id: message.id,
      rating: input.rating,
      comment: input.comment ?? null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return {
    id: row.id,
    object: 'message_feedback',
    message_id: row.message_id,
    conversation_id: row.conversation_id,
    rating: row.rating,
    comment: row.comment,
    created_at: iso(row.created_at),
  };
}
