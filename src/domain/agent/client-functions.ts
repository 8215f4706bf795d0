// Client functions: the calls the application runs. A paused turn stores its state and ends
// WAITING_CLIENT (it resumes through `continueTurn`, ./resume-turn.ts); in the default mode the
// turn itself waits for the results, posted to the function-results endpoint, for
// CLIENT_FUNCTION_TIMEOUT_MS, holding one of its tenant's waiting places.
import type { Transaction } from 'kysely';
import type { Database } from '../../db/index.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { ConflictError, InvalidParametersError, NotFoundError } from '../errors.js';
import { holdsClaim } from './conversation-lease.js';
import type { FunctionResultsAck } from './engine-types.js';
import { useClientResult } from './turn-events.js';
import { type EngineContext, type Runtime, TurnFailure, type TurnState } from './turn-runtime.js';
import { resultItems, saveState } from './turn-store.js';
import type { ToolCall } from './types.js';

/**
 * Leaves the calls to the client. A paused turn stores its state and stops (`paused`); in the
 * default mode the turn waits for their results and goes on with them (`answered`).
 */
export async function askClient(ctx: EngineContext, rt: Runtime, calls: ToolCall[]): Promise<'paused' | 'answered'> {
  if (rt.mode === 'pause') {
    await saveState(ctx, rt, 'WAITING_CLIENT', calls);
    return 'paused';
  }
  const place = ctx.places.holdWaiting(rt.tenantId, rt.messageId);
  if ('full' in place) throw new TurnFailure('turn_limit_exceeded', place.full);
  const { leave } = place;
  try {
    await saveState(ctx, rt, 'WAITING_CLIENT', calls);
    rt.onWaiting();
    await awaitClientResults(
      ctx,
      rt,
      calls.map((c) => c.call_id),
    );
  } finally {
    leave();
  }
  await saveState(ctx, rt, 'IN_PROGRESS');
  for (const item of await resultItems(ctx, rt, calls)) {
    if (item.type === 'result') useClientResult(rt, item);
  }
  return 'answered';
}

/** Waits (default mode) until every listed client call has a result, or the timeout. */
async function awaitClientResults(ctx: EngineContext, rt: Runtime, callIds: string[]) {
  const { clientFunctionTimeoutMs } = ctx.deps;
  const deadline = Date.now() + clientFunctionTimeoutMs;
  for (;;) {
    const pending = await ctx.db
      .selectFrom('function_calls')
      .select('call_id')
      .where('tenant_id', '=', rt.tenantId)
      .where('message_id', '=', rt.messageId)
      .where('call_id', 'in', callIds)
      .where('status', '=', 'pending')
      .execute();
    if (pending.length === 0) return;
    if (!(await holdsClaim(ctx, rt))) {
      throw new TurnFailure('turn_interrupted', 'The turn lost its conversation to a newer turn.');
    }
    if (ctx.shutdown.aborted) throw new TurnFailure('server_shutdown', 'The server is shutting down.');
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new TurnFailure(
        'client_timeout',
        `The client did not send the results of ${pending.map((p) => p.call_id).join(', ')} within ${clientFunctionTimeoutMs} ms.`,
      );
    }
    // Woken by results sent to this process, by the turn places' check (results sent to another instance,
    // a newer turn), by shutdown, or at the deadline.
    await ctx.wakeups.sleep(rt.messageId, left);
  }
}

/**
 * Records client function results for a turn waiting on them. The turn's message row is locked
 * while the results are checked and written: a continue claiming the turn, or a waiting turn
 * going on, changes that row, so a result is either written before the turn reads it or refused
 * (409) because the turn has used the one it had.
 */
export async function submitFunctionResults(
  ctx: EngineContext,
  tenantId: string,
  messageId: string,
  results: { call_id: string; output: unknown }[],
): Promise<FunctionResultsAck> {
  const { conversationId, seen, pending } = await ctx.db
    .transaction()
    .execute((trx) => storeResults(ctx, trx, tenantId, messageId, results));
  ctx.wakeups.notify(messageId);
  return {
    object: 'function_results',
    message_id: messageId,
    conversation_id: conversationId,
    received_call_ids: [...seen],
    pending_call_ids: pending,
    ready: pending.length === 0,
  };
}

async function storeResults(
  ctx: EngineContext,
  trx: Transaction<Database>,
  tenantId: string,
  messageId: string,
  results: { call_id: string; output: unknown }[],
) {
  const message = await lockWaitingMessage(ctx, trx, tenantId, messageId);
  const calls = await trx
    .selectFrom('function_calls')
    .select(['call_id', 'status'])
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .where('type', '=', 'client')
    .execute();
  let usedAlready = (callId: string) => calls.find((c) => c.call_id === callId)?.status !== 'pending';
  if (message.status === 'WAITING_CLIENT') {
    // A paused turn has already used the results of its earlier steps: they are in its state.
    const used = await usedResults(trx, tenantId, messageId);
    usedAlready = (callId) => used.has(callId);
  }
  const known = new Set(calls.map((c) => c.call_id));
  const seen = new Set<string>();
  results.forEach((result, i) => {
    if (!known.has(result.call_id)) {
      throw new InvalidParametersError(
        `results[${i}].call_id`,
        `No client function call '${result.call_id}' in this turn.`,
      );
    }
    if (seen.has(result.call_id)) {
      throw new InvalidParametersError(`results[${i}].call_id`, `The result of '${result.call_id}' is sent twice.`);
    }
    if (usedAlready(result.call_id)) {
      throw new ConflictError(
        `The result of '${result.call_id}' was already used by the turn.`,
        `results[${i}].call_id`,
      );
    }
    seen.add(result.call_id);
  });
  for (const result of results) {
    await trx
      .updateTable('function_calls')
      .set({ status: 'completed', output: JSON.stringify(result.output ?? null), updated_at: new Date() })
      .where('tenant_id', '=', tenantId)
      .where('message_id', '=', messageId)
      .where('call_id', '=', result.call_id)
      .execute();
  }
  const pending = calls.filter((c) => c.status === 'pending' && !seen.has(c.call_id)).map((c) => c.call_id);
  return { conversationId: message.conversation_id, seen, pending };
}

/** The turn's message, locked, when it may still take results: waiting, or running (a call answered early). */
async function lockWaitingMessage(ctx: EngineContext, trx: Transaction<Database>, tenantId: string, messageId: string) {
  const message = await trx
    .selectFrom('messages')
    .select(['status', 'conversation_id'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', messageId)
    .$if(!ctx.deps.playsSimulations, (query) => query.where(isCustomerConversation(tenantId, 'conversation_id')))
    .forUpdate()
    .executeTakeFirst();
  if (!message) throw new NotFoundError('message', messageId);
  // IN_PROGRESS too: a client may answer a call as soon as it sees it, before the turn is stored as waiting.
  if (message.status !== 'WAITING_CLIENT' && message.status !== 'IN_PROGRESS') {
    throw new ConflictError(
      message.status === 'ABANDONED'
        ? 'This turn was abandoned when a new message was sent; its function results are no longer needed.'
        : `This turn is not waiting for function results (status ${message.status}).`,
    );
  }
  return message;
}

/** The calls whose results a paused turn's stored state already holds. */
async function usedResults(trx: Transaction<Database>, tenantId: string, messageId: string): Promise<Set<string>> {
  const turn = await trx
    .selectFrom('agent_turns')
    .select('state')
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .executeTakeFirst();
  const used = new Set<string>();
  for (const item of (turn?.state as TurnState | undefined)?.items ?? []) {
    if (item.type === 'result') used.add(item.call_id);
  }
  return used;
}
