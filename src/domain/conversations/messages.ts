// Messages of conversations as clients read them, with the function calls each made.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { decodeIdCursor, type Page, toList } from '../pagination.js';
import { JsonObject, Nullable, StringEnum, Timestamp, Uuid } from '../shapes.js';
import { findConversation } from './conversation-records.js';
import { isCustomerConversation } from './customer-scope.js';

const TURN_STATUSES = ['IN_PROGRESS', 'COMPLETED', 'WAITING_CLIENT', 'FAILED', 'ABANDONED'] as const;
export type MessageStatus = (typeof TURN_STATUSES)[number];

export const FunctionCallRecord = Type.Object({
  call_id: Type.String({ description: 'The id to send the result under.' }),
  name: Type.String(),
  type: StringEnum(['client', 'workflow'], 'client: run by the application; workflow: run by the server.'),
  arguments: JsonObject(),
  status: StringEnum(['pending', 'completed', 'failed']),
  output: Type.Unknown({ description: 'The result, once known; null before.' }),
});
export type FunctionCallRecord = Static<typeof FunctionCallRecord>;

export const CitationRecord = Type.Object({
  document_id: Type.String(),
  title: Type.String(),
  source_id: Nullable(Type.String()),
  url: Nullable(
    Type.String({ description: 'The link to the document: the URL of a page read from a website; null for others.' }),
  ),
  language: Type.String(),
  snippet: Type.String(),
});
export type CitationRecord = Static<typeof CitationRecord>;

export const MessageRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('message'),
    conversation_id: Uuid,
    agent_id: Nullable(Uuid),
    role: StringEnum(['user', 'assistant', 'system']),
    author: StringEnum(['customer', 'application', 'agent']),
    hidden: Type.Boolean(),
    content: Type.String(),
    status: StringEnum(TURN_STATUSES, 'An agent message: the state of its turn. Other messages: COMPLETED.'),
    function_calls: Type.Array(FunctionCallRecord),
    citations: Type.Array(CitationRecord),
    handoff: Nullable(Type.Object({ agent_id: Uuid, agent_name: Type.String(), ticket_id: Uuid })),
    error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
    in_reply_to: Nullable(Uuid),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Message' },
);
export type MessageRecord = Static<typeof MessageRecord>;

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
  // Citations stored before they carried `url` have none: null, as for a document with no link.
  citations: (row.citations as CitationRecord[]).map((citation) => ({ ...citation, url: citation.url ?? null })),
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
