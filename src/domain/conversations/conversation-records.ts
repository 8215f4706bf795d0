// Conversations as clients read them: a customer's, never one a simulation case is playing.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { JsonObject, Nullable, Timestamp, Uuid } from '../shapes.js';
import { isCustomerConversation } from './customer-scope.js';

export const ConversationRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('conversation'),
    agent_id: Uuid,
    language: Nullable(Type.String()),
    context: Nullable(JsonObject()),
    message_count: Type.Integer(),
    turn_in_progress: Type.Boolean(),
    last_message_at: Nullable(Timestamp),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Conversation' },
);
export type ConversationRecord = Static<typeof ConversationRecord>;

export interface ConversationRow {
  id: string;
  tenant_id: string;
  agent_id: string;
  language: string | null;
  context: Record<string, unknown> | null;
  message_count: number;
  active_turn_id: string | null;
  active_turn_expires_at: Date | null;
  last_message_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const toConversationRecord = (row: ConversationRow): ConversationRecord => ({
  id: row.id,
  object: 'conversation',
  agent_id: row.agent_id,
  language: row.language,
  context: row.context,
  message_count: Number(row.message_count),
  turn_in_progress:
    row.active_turn_id !== null && row.active_turn_expires_at !== null && row.active_turn_expires_at > new Date(),
  last_message_at: iso(row.last_message_at),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export type ConversationPage = Page & { agent_id?: string | undefined };

/** A customer's conversation. */
export async function findConversation(
  db: Db,
  tenantId: string,
  conversationId: string,
): Promise<ConversationRow | undefined> {
  return db
    .selectFrom('conversations')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', conversationId)
    .where(isCustomerConversation(tenantId, 'id'))
    .executeTakeFirst();
}

export async function getConversation(db: Db, tenantId: string, conversationId: string): Promise<ConversationRecord> {
  const row = await findConversation(db, tenantId, conversationId);
  if (!row) throw new NotFoundError('conversation', conversationId);
  return toConversationRecord(row);
}

export async function listConversations(db: Db, tenantId: string, page: ConversationPage) {
  let query = db
    .selectFrom('conversations')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where(isCustomerConversation(tenantId, 'id'));
  if (page.agent_id !== undefined) query = query.where('agent_id', '=', page.agent_id);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toConversationRecord, (row) => row.id);
}
