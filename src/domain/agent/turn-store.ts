// What a turn writes and reads back as it runs: its state and message, its trace, its calls and
// their results, its handoffs, and its end. Every write of a turn locks its conversation first.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { release } from './conversation-lease.js';
import { saveTrace } from './trace-store.js';
import type { EngineContext, Runtime } from './turn-runtime.js';
import type { HandoffTarget, HistoryMessage, ToolCall, ToolSpec, TurnItem } from './types.js';

/** Earlier messages a provider sees. */
export const HISTORY_LIMIT = 20;

type TurnError = { code: string; message: string };

/** How a turn ended, as its message records it. */
export interface TurnEnd {
  status: 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED';
  error: TurnError | null;
}

/**
 * Locks the turn's conversation row in `trx` before the turn's own rows are written. Deleting a
 * conversation (a simulation dataset deleted mid-run deletes the ones its runs play) locks it
 * and then, by cascade, its messages and their turns; a write holding the turn's message while
 * it waits for the conversation would deadlock with that delete. Taken first, it waits instead.
 */
export async function lockConversation(trx: Db, rt: Runtime) {
  await trx
    .selectFrom('conversations')
    .select('id')
    .where('tenant_id', '=', rt.tenantId)
    .where('id', '=', rt.conversationId)
    .forNoKeyUpdate()
    .execute();
}

/**
 * Writes the turn's state and its message (status, text so far, citations) in `trx`, its
 * conversation locked first. The final write also records the error, and leaves alone a turn
 * that lost its conversation (its lease lapsed and the next turn marked it FAILED): that verdict
 * stands.
 */
async function writeTurn(
  trx: Db,
  rt: Runtime,
  status: 'IN_PROGRESS' | 'WAITING_CLIENT' | 'COMPLETED' | 'FAILED',
  final?: { error: unknown },
) {
  await lockConversation(trx, rt);
  await trx
    .updateTable('agent_turns')
    .set({
      state: JSON.stringify(rt.state),
      client_functions: JSON.stringify(rt.clientFunctions),
      context: JSON.stringify(rt.context),
      updated_at: new Date(),
    })
    .where('tenant_id', '=', rt.tenantId)
    .where('message_id', '=', rt.messageId)
    .execute();
  let message = trx
    .updateTable('messages')
    .set({
      status,
      content: rt.state.texts.join('\n\n'),
      citations: JSON.stringify(rt.state.citations),
      handoff: JSON.stringify(rt.state.handoff),
      ...(final ? { error: JSON.stringify(final.error) } : {}),
      updated_at: new Date(),
    })
    .where('tenant_id', '=', rt.tenantId)
    .where('id', '=', rt.messageId);
  if (final) message = message.where('status', 'in', ['IN_PROGRESS', 'WAITING_CLIENT']);
  await message.execute();
  await writeTrace(trx, rt, status, (final?.error as TurnError | null) ?? null);
}

/** Writes the turn's trace as it stands, with the state written beside it. */
async function writeTrace(trx: Db, rt: Runtime, status: string, error: TurnError | null) {
  rt.trace.settle(status, error, rt.state);
  const owner = { tenantId: rt.tenantId, messageId: rt.messageId, conversationId: rt.conversationId };
  await saveTrace(trx, { ...owner, agentId: rt.agent.id }, rt.trace, status);
}

/** Stores the running turn's state; once it waits for client calls, with the webhook event that says so. */
export async function saveState(
  ctx: EngineContext,
  rt: Runtime,
  status: 'IN_PROGRESS' | 'WAITING_CLIENT',
  waitingFor: { call_id: string; name: string; arguments: unknown }[] = [],
) {
  const { emitEvent } = ctx.deps;
  await ctx.db.transaction().execute(async (trx) => {
    await writeTurn(trx, rt, status);
    // Webhook event, committed with the state it reports.
    if (status === 'WAITING_CLIENT' && emitEvent) {
      await emitEvent(trx, rt.tenantId, 'conversation.turn.waiting_client', {
        conversation_id: rt.conversationId,
        message_id: rt.messageId,
        function_calls: waitingFor.map((c) => ({ call_id: c.call_id, name: c.name, arguments: c.arguments })),
      });
    }
  });
}

/**
 * Writes the turn's end and frees its conversation in one transaction. A state the database
 * refuses (a NUL character in the model's text) ends the turn FAILED without it, rather than
 * leave it in progress; if the database itself is gone, this throws.
 */
export async function writeTurnEnd(ctx: EngineContext, rt: Runtime, end: TurnEnd): Promise<TurnEnd> {
  try {
    await ctx.db.transaction().execute(async (trx) => {
      await writeTurn(trx, rt, end.status, { error: end.error });
      await release(trx, rt);
    });
    return end;
  } catch (caught) {
    const eventId = newId();
    ctx.logError(caught, eventId);
    const failed: TurnEnd = {
      status: 'FAILED',
      error: {
        code: 'internal_error',
        message: `The turn's result could not be stored; it was logged (event ${eventId}).`,
      },
    };
    await ctx.db.transaction().execute(async (trx) => {
      await lockConversation(trx, rt);
      await trx
        .updateTable('messages')
        .set({ status: failed.status, error: JSON.stringify(failed.error), updated_at: new Date() })
        .where('tenant_id', '=', rt.tenantId)
        .where('id', '=', rt.messageId)
        .where('status', 'in', ['IN_PROGRESS', 'WAITING_CLIENT'])
        .execute();
      await writeTrace(trx, rt, failed.status, failed.error);
      await release(trx, rt);
    });
    return failed;
  }
}

/** Records the step's calls of client functions and workflows, pending, after the turn's earlier ones. */
export async function recordCalls(ctx: EngineContext, rt: Runtime, calls: ToolCall[], byName: Map<string, ToolSpec>) {
  if (calls.length === 0) return;
  const base = await ctx.db
    .selectFrom('function_calls')
    .select(sql<number>`count(*)`.as('n'))
    .where('tenant_id', '=', rt.tenantId)
    .where('message_id', '=', rt.messageId)
    .executeTakeFirstOrThrow();
  await ctx.db
    .insertInto('function_calls')
    .values(
      calls.map((call, i) => ({
        tenant_id: rt.tenantId,
        message_id: rt.messageId,
        call_id: call.call_id,
        position: Number(base.n) + i,
        name: call.name,
        type: byName.get(call.name)?.type as 'client' | 'workflow',
        arguments: JSON.stringify(call.arguments),
        status: 'pending' as const,
        output: JSON.stringify(null),
      })),
    )
    .execute();
}

export async function setCallResult(
  ctx: EngineContext,
  rt: Runtime,
  callId: string,
  status: 'completed' | 'failed',
  output: unknown,
) {
  await ctx.db
    .updateTable('function_calls')
    .set({ status, output: JSON.stringify(output ?? null), updated_at: new Date() })
    .where('tenant_id', '=', rt.tenantId)
    .where('message_id', '=', rt.messageId)
    .where('call_id', '=', callId)
    .execute();
}

/** The result items of `calls`: the engine's own answers, else the stored outputs. */
export async function resultItems(ctx: EngineContext, rt: Runtime, calls: ToolCall[]): Promise<TurnItem[]> {
  const rows = await ctx.db
    .selectFrom('function_calls')
    .select(['call_id', 'output'])
    .where('tenant_id', '=', rt.tenantId)
    .where('message_id', '=', rt.messageId)
    .execute();
  const outputs = new Map(rows.map((r) => [r.call_id, r.output]));
  const inline = rt.state.inline_results;
  return calls.map((call) => ({
    type: 'result',
    call_id: call.call_id,
    name: call.name,
    output: Object.hasOwn(inline, call.call_id) ? inline[call.call_id] : (outputs.get(call.call_id) ?? null),
  }));
}

/** Hands the conversation to `target`: a ticket, the conversation's new agent, and the `handoff` event. */
export async function handOff(ctx: EngineContext, rt: Runtime, target: HandoffTarget, reason: string) {
  const ticketId = newId();
  await ctx.db.transaction().execute(async (trx) => {
    // The conversation first, as every write of a turn (lockConversation, above).
    await lockConversation(trx, rt);
    await trx
      .insertInto('tickets')
      .values({
        id: ticketId,
        tenant_id: rt.tenantId,
        conversation_id: rt.conversationId,
        message_id: rt.messageId,
        from_agent_id: rt.agent.id,
        to_agent_id: target.id,
        reason,
      })
      .execute();
    await trx
      .updateTable('conversations')
      .set({ agent_id: target.id, updated_at: new Date() })
      .where('tenant_id', '=', rt.tenantId)
      .where('id', '=', rt.conversationId)
      .execute();
  });
  rt.state.handoff = { agent_id: target.id, agent_name: target.name, ticket_id: ticketId };
  rt.emit('handoff', { agent_id: target.id, agent_name: target.name, ticket_id: ticketId });
}

/** The conversation's latest messages before `beforeId` with content, oldest first. */
export async function loadHistory(
  executor: Db,
  tenantId: string,
  conversationId: string,
  beforeId: string,
): Promise<HistoryMessage[]> {
  const rows = await executor
    .selectFrom('messages')
    .select(['author', 'content'])
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .where('id', '<', beforeId)
    .where('content', '<>', '')
    .orderBy('id', 'desc')
    .limit(HISTORY_LIMIT)
    .execute();
  return rows.reverse().map((r) => ({ author: r.author, content: r.content }));
}
