// Where turn traces live (`message_traces`, one row per agent message, deleted with it): the
// engine writes a turn's trace in the transaction that writes the turn's state, reads it back when
// a paused turn resumes, and `GET /messages/{id}/trace` reads it (docs/agent.md, "The trace of a
// turn"). Every query names the tenant.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { isCustomerConversation, type MessageStatus } from '../conversations/conversations.js';
import { NotFoundError } from '../errors.js';
import type { TraceData, TurnTrace } from './turn-trace.js';

/** A 404 that says why this message has no trace. */
class NoTraceError extends NotFoundError {
  constructor(messageId: string, message: string) {
    super('message', messageId);
    this.message = message;
  }
}

export interface TraceOwner {
  tenantId: string;
  messageId: string;
  conversationId: string;
  agentId: string | null;
}

/** Writes (or rewrites) a turn's trace in `executor`, the transaction that writes its state. */
export async function saveTrace(executor: Db, owner: TraceOwner, trace: TurnTrace, status: string): Promise<void> {
  const totals = trace.totals();
  const row = {
    tenant_id: owner.tenantId,
    conversation_id: owner.conversationId,
    agent_id: owner.agentId,
    provider: trace.data.provider,
    status,
    input_tokens: totals.input_tokens,
    output_tokens: totals.output_tokens,
    cost: totals.cost,
    latency_ms: trace.data.latency_ms,
    trace: trace.serialize(),
    updated_at: new Date(),
  };
  await executor
    .insertInto('message_traces')
    .values({ message_id: owner.messageId, ...row })
    .onConflict((oc) => oc.column('message_id').doUpdateSet(row).where('message_traces.tenant_id', '=', owner.tenantId))
    .execute();
}

/** The stored trace of a turn, to go on with when it resumes. */
export async function loadTraceData(db: Db, tenantId: string, messageId: string): Promise<TraceData | undefined> {
  const row = await db
    .selectFrom('message_traces')
    .select('trace')
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .executeTakeFirst();
  return row?.trace as TraceData | undefined;
}

export interface TraceRecord extends Omit<TraceData, 'started_at' | 'ended_at'> {
  object: 'message_trace';
  message_id: string;
  conversation_id: string;
  agent_id: string | null;
  /** The message's status now: the trace is final once it is COMPLETED or FAILED. */
  status: MessageStatus;
  input_tokens: number;
  output_tokens: number;
  cost: number | null;
  started_at: string;
  ended_at: string | null;
  updated_at: string;
}

const traceQuery = (executor: Db, tenantId: string) =>
  executor
    .selectFrom('message_traces as t')
    .innerJoin('messages as m', (join) => join.onRef('m.id', '=', 't.message_id').on('m.tenant_id', '=', tenantId))
    .select([
      't.message_id',
      't.conversation_id',
      't.agent_id',
      't.input_tokens',
      't.output_tokens',
      't.cost',
      't.trace',
      't.updated_at',
      'm.status',
    ])
    .where('t.tenant_id', '=', tenantId);

type TraceRow = Awaited<ReturnType<ReturnType<typeof traceQuery>['execute']>>[number];

function toRecord(row: TraceRow): TraceRecord {
  const data = row.trace as unknown as TraceData;
  return {
    object: 'message_trace',
    message_id: row.message_id,
    conversation_id: row.conversation_id,
    agent_id: row.agent_id,
    status: row.status as MessageStatus,
    input_tokens: Number(row.input_tokens),
    output_tokens: Number(row.output_tokens),
    cost: row.cost === null ? null : Number(row.cost),
    ...data,
    started_at: data.started_at,
    ended_at: data.ended_at,
    updated_at: iso(row.updated_at),
  };
}

/**
 * The traces of a conversation's turns, oldest first, whatever kind of conversation it is: a
 * simulation copies its case's before the case's conversation, and with it the traces, is deleted.
 */
export async function conversationTraces(executor: Db, tenantId: string, conversationId: string) {
  const rows = await traceQuery(executor, tenantId)
    .where('t.conversation_id', '=', conversationId)
    .orderBy(sql`t.message_id`)
    .execute();
  return rows.map(toRecord);
}

/** Reads traces for clients: a customer's conversation only, as every conversation read. */
export function createTraceReader({ db }: { db: Db }) {
  return {
    /**
     * The trace of an agent message. 404 for an unknown message, another workspace's, a message
     * that is not the agent's, and a turn that has stored no trace yet (it is written when the
     * turn waits for its client or ends).
     */
    async getTrace(tenantId: string, messageId: string): Promise<TraceRecord> {
      const row = await traceQuery(db, tenantId)
        .where('t.message_id', '=', messageId)
        .where(isCustomerConversation(tenantId, 't.conversation_id'))
        .executeTakeFirst();
      if (row) return toRecord(row);
      const message = await db
        .selectFrom('messages')
        .select(['author', 'status'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', messageId)
        .where(isCustomerConversation(tenantId, 'conversation_id'))
        .executeTakeFirst();
      if (message?.author === 'agent' && message.status === 'IN_PROGRESS') {
        throw new NoTraceError(
          messageId,
          `The turn of message '${messageId}' is still running; its trace is stored once it waits for its client or ends.`,
        );
      }
      if (message?.author === 'agent') {
        throw new NoTraceError(
          messageId,
          `The turn of message '${messageId}' stored no trace: it ran before traces were recorded, or its server stopped before the turn wrote one.`,
        );
      }
      if (message) {
        throw new NoTraceError(
          messageId,
          `Message '${messageId}' has no trace: only the agent's messages have one, from their turn.`,
        );
      }
      throw new NotFoundError('message', messageId);
    },
  };
}

export type TraceReader = ReturnType<typeof createTraceReader>;
