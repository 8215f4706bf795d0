// Messages of conversations as clients read them, with the function calls each made.
import type { Db } from '../../db/client.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { decodeIdCursor, type Page, toList } from '../pagination.js';
import { findConversation } from './conversation-records.js';
import { isCustomerConversation } from './customer-scope.js';

export type MessageStatus = 'IN_PROGRESS' | 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED' | 'ABANDONED';

export interface FunctionCallRecord {
  call_id: string;
  name: string;
  type: 'client' | 'workflow';
  arguments: Record<string, unknown>;
  status: 'pending' | 'completed' | 'failed';
  output: unknown;
}

export interface CitationRecord {
  document_id: string;
  title: string;
  source_id: string | null;
  language: string;
  snippet: string;
}

export interface MessageRecord {
  id: string;
  object: 'message';
  conversation_id: string;
  agent_id: string | null;
  role: 'user' | 'assistant' | 'system';
  author: 'customer' | 'application' | 'agent';
  hidden: boolean;
  content: string;
  status: MessageStatus;
  function_calls: FunctionCallRecord[];
  citations: CitationRecord[];
  handoff: { agent_id: string; agent_name: string; ticket_id: string } | null;
  error: { code: string; message: string } | null;
  in_reply_to: string | null;
  created_at: string;
  updated_at: string;
}

export interface MessageRow {
  id: string;
  tenant_id: string;
  conversation_id: string;
  agent_id: string | null;
  role: 'user' | 'assistant' | 'system';
  author: 'customer' | 'application' | 'agent';
  hidden: boolean;
  content: string;
  status: string;
  citations: unknown[];
  handoff: MessageRecord['handoff'];
  error: MessageRecord['error'];
  in_reply_to: string | null;
  created_at: Date;
  updated_at: Date;
}

export const toMessageRecord = (row: MessageRow, calls: FunctionCallRecord[]): MessageRecord => ({
  id: row.id,
  object: 'message',
  conversation_id: row.conversation_id,
  agent_id: row.agent_id,
  role: row.role,
  author: row.author,
  hidden: row.hidden,
  content: row.content,
  status: row.status as MessageStatus,
  function_calls: calls,
  citations: row.citations as CitationRecord[],
  handoff: row.handoff,
  error: row.error,
  in_reply_to: row.in_reply_to,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export async function functionCalls(
  db: Db,
  tenantId: string,
  messageIds: string[],
): Promise<Map<string, FunctionCallRecord[]>> {
  const byMessage = new Map<string, FunctionCallRecord[]>();
  if (messageIds.length === 0) return byMessage;
  const rows = await db
    .selectFrom('function_calls')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('message_id', 'in', messageIds)
    .orderBy('message_id')
    .orderBy('position')
    .execute();
  for (const row of rows) {
    const list = byMessage.get(row.message_id) ?? [];
    list.push({
      call_id: row.call_id,
      name: row.name,
      type: row.type,
      arguments: row.arguments,
      status: row.status,
      output: row.output ?? null,
    });
    byMessage.set(row.message_id, list);
  }
  return byMessage;
}

/** A message of a customer's conversation; with `simulated`, of a simulation case's too. */
export async function findMessage(
  db: Db,
  tenantId: string,
  messageId: string,
  { simulated = false } = {},
): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', messageId)
    .$if(!simulated, (query) => query.where(isCustomerConversation(tenantId, 'conversation_id')))
    .executeTakeFirst();
}

async function messageRecord(db: Db, tenantId: string, row: MessageRow): Promise<MessageRecord> {
  return toMessageRecord(row, (await functionCalls(db, tenantId, [row.id])).get(row.id) ?? []);
}

export async function getMessage(db: Db, tenantId: string, messageId: string): Promise<MessageRecord> {
  const row = await findMessage(db, tenantId, messageId);
  if (!row) throw new NotFoundError('message', messageId);
  return messageRecord(db, tenantId, row);
}

/**
 * The message of a turn, as the turn engine reports it when the turn ends or waits: a
 * simulated conversation's too, which the engine that plays simulations answers with.
 */
export async function turnMessage(db: Db, tenantId: string, messageId: string): Promise<MessageRecord> {
  const row = await findMessage(db, tenantId, messageId, { simulated: true });
  if (!row) throw new NotFoundError('message', messageId);
  return messageRecord(db, tenantId, row);
}

/** Messages of a conversation, oldest first (the order a transcript reads in). */
export async function listMessages(db: Db, tenantId: string, conversationId: string, page: Page) {
  if (!(await findConversation(db, tenantId, conversationId))) throw new NotFoundError('conversation', conversationId);
  let query = db
    .selectFrom('messages')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .orderBy('id', 'asc')
    .limit(page.limit + 1);
  const after = decodeIdCursor(page.cursor);
  if (after) query = query.where('id', '>', after);
  const rows = await query.execute();
  const calls = await functionCalls(
    db,
    tenantId,
    rows.slice(0, page.limit).map((r) => r.id),
  );
  return toList(
    rows,
    page,
    (row) => toMessageRecord(row, calls.get(row.id) ?? []),
    (row) => row.id,
  );
}
