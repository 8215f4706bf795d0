// Conversations and their messages as clients read them (DESIGN.md §7), and message feedback.
// The turn engine (src/agent/engine.ts) writes them; this module owns their records, and the rule
// that tells a customer's conversation from one a simulation case is playing.
import { type RawBuilder, type SqlBool, sql } from 'kysely';
import type { Db } from '../../db/client.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { decodeIdCursor, newestFirst, type Page, toList } from '../pagination.js';

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

export interface ConversationRecord {
  id: string;
  object: 'conversation';
  agent_id: string;
  language: string | null;
  context: Record<string, unknown> | null;
  message_count: number;
  turn_in_progress: boolean;
  last_message_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface FeedbackRecord {
  id: string;
  object: 'message_feedback';
  message_id: string;
  conversation_id: string;
  rating: 'positive' | 'negative';
  comment: string | null;
  created_at: string;
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

/**
 * Whether the conversation in `column` is a customer's, not one a simulation case is playing
 * (docs/simulations.md, "Keeping simulations apart from customers"). Every read of conversations
 * for clients filters with it: lists, reads and messages, feedback, continuing a conversation,
 * task link targets, imports into datasets, dashboard analytics, question extraction.
 * `nullable`: a row that belongs to no conversation passes.
 *
 * `not in` the tenant's marks rather than `not exists`: PostgreSQL runs it as one hashed sub-plan
 * per statement whatever the table statistics (PGlite never analyses); the marks are few, one per
 * case playing now.
 */
export function isCustomerConversation(
  tenantId: string,
  column: string,
  options: { nullable?: boolean } = {},
): RawBuilder<SqlBool> {
  const ref = sql.ref(column);
  const notSimulated = sql<SqlBool>`${ref} not in (select s.conversation_id from simulation_conversations s where s.tenant_id = ${tenantId})`;
  return options.nullable ? sql<SqlBool>`(${ref} is null or ${notSimulated})` : notSimulated;
}

export function createConversationService({ db }: { db: Db }) {
  async function functionCalls(tenantId: string, messageIds: string[]): Promise<Map<string, FunctionCallRecord[]>> {
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
  async function findMessage(
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

  async function messageRecord(tenantId: string, row: MessageRow): Promise<MessageRecord> {
    return toMessageRecord(row, (await functionCalls(tenantId, [row.id])).get(row.id) ?? []);
  }

  async function getMessage(tenantId: string, messageId: string): Promise<MessageRecord> {
    const row = await findMessage(tenantId, messageId);
    if (!row) throw new NotFoundError('message', messageId);
    return messageRecord(tenantId, row);
  }

  /** A customer's conversation. */
  async function findConversation(tenantId: string, conversationId: string): Promise<ConversationRow | undefined> {
    return db
      .selectFrom('conversations')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', conversationId)
      .where(isCustomerConversation(tenantId, 'id'))
      .executeTakeFirst();
  }

  return {
    findMessage,
    getMessage,
    findConversation,

    /**
     * The message of a turn, as the turn engine reports it when the turn ends or waits: a
     * simulated conversation's too, which the engine that plays simulations answers with.
     */
    async turnMessage(tenantId: string, messageId: string): Promise<MessageRecord> {
      const row = await findMessage(tenantId, messageId, { simulated: true });
      if (!row) throw new NotFoundError('message', messageId);
      return messageRecord(tenantId, row);
    },

    async getConversation(tenantId: string, conversationId: string): Promise<ConversationRecord> {
      const row = await findConversation(tenantId, conversationId);
      if (!row) throw new NotFoundError('conversation', conversationId);
      return toConversationRecord(row);
    },

    async listConversations(tenantId: string, page: Page & { agent_id?: string | undefined }) {
      let query = db
        .selectFrom('conversations')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where(isCustomerConversation(tenantId, 'id'));
      if (page.agent_id !== undefined) query = query.where('agent_id', '=', page.agent_id);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toConversationRecord, (row) => row.id);
    },

    /** Messages of a conversation, oldest first (the order a transcript reads in). */
    async listMessages(tenantId: string, conversationId: string, page: Page) {
      if (!(await findConversation(tenantId, conversationId))) throw new NotFoundError('conversation', conversationId);
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
        tenantId,
        rows.slice(0, page.limit).map((r) => r.id),
      );
      return toList(
        rows,
        page,
        (row) => toMessageRecord(row, calls.get(row.id) ?? []),
        (row) => row.id,
      );
    },

    functionCalls,

    /** Feedback on an agent's message; each call records one. */
    async createFeedback(
      tenantId: string,
      messageId: string,
      input: { rating: 'positive' | 'negative'; comment?: string | undefined },
    ): Promise<FeedbackRecord> {
      const message = await findMessage(tenantId, messageId);
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
    },
  };
}

export type ConversationService = ReturnType<typeof createConversationService>;
