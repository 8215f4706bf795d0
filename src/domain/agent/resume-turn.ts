// A paused turn resumes once every call it waits for has a result: it claims its conversation
// again, with the client functions and context sent now, uses the results, and goes on.
import type { Transaction } from 'kysely';
import type { Database } from '../../db/index.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { claim } from './conversation-lease.js';
import type { ContinueInput, RunningTurn, TurnOptions } from './engine-types.js';
import { loadTraceData } from './trace-store.js';
import { useClientResult } from './turn-events.js';
import { launch } from './turn-loop.js';
import { type EngineContext, newTrace, type Runtime, runtimeFor, settlement, type TurnState } from './turn-runtime.js';
import { resultItems } from './turn-store.js';
import { checkClientFunctions } from './turn-tools.js';
import { createTurnTrace } from './turn-trace.js';
import type { ClientFunction } from './types.js';

/** Resumes a paused turn once every call has its result, with the functions and context sent now. */
export function continueTurn(
  ctx: EngineContext,
  tenantId: string,
  messageId: string,
  input: ContinueInput,
  options: TurnOptions = {},
): Promise<RunningTurn> {
  return ctx.places.streamed(tenantId, Boolean(options.onEvent), () =>
    resumeTurn(ctx, tenantId, messageId, input, options),
  );
}

async function resumeTurn(
  ctx: EngineContext,
  tenantId: string,
  messageId: string,
  input: ContinueInput,
  options: TurnOptions,
): Promise<RunningTurn> {
  const { message, turn, calls } = await pausedTurn(ctx, tenantId, messageId);
  checkClientFunctions(input.client_functions);
  const clientFunctions = input.client_functions ?? (turn.client_functions as ClientFunction[]);
  const context = input.context ?? turn.context;
  const conversationId = message.conversation_id;
  // The functions and context sent now are stored with the claim: a value the database refuses
  // (a NUL character) then leaves the turn paused, as if the continue had not been sent.
  await ctx.db.transaction().execute(async (trx) => {
    await claimPaused(ctx, trx, { tenantId, messageId, conversationId }, clientFunctions, context);
    // As a message's `context` does, a continue's replaces the conversation's (docs/agent.md).
    if (input.context !== undefined) {
      await trx
        .updateTable('conversations')
        .set({ context: JSON.stringify(input.context) })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', conversationId)
        .execute();
    }
  });

  const agent =
    (message.agent_id ? await ctx.agents.findAgent(tenantId, message.agent_id) : undefined) ??
    (await ctx.agents.defaultAgent(tenantId));
  const state = turn.state as TurnState;
  const stored = await loadTraceData(ctx.db, tenantId, messageId);
  const trace = stored ? createTurnTrace(ctx.provider, ctx.traceOptions, stored) : newTrace(ctx, '', state.language);
  const settled = settlement();
  const base = { tenantId, messageId, conversationId, agent, mode: 'pause' as const, clientFunctions, context };
  const rt = runtimeFor(ctx, { ...base, state, trace }, options, settled);
  // The client's results, now used; a workflow's was streamed when the turn called it.
  const clientCalls = new Set(calls.filter((call) => call.type === 'client').map((call) => call.call_id));
  await useResults(ctx, rt, clientCalls);
  const finished = launch(ctx, rt, settled);
  return { messageId, conversationId, settled: settled.promise, finished };
}

/** The paused turn of the message, with its calls; refused (409) unless it is paused with every result in. */
async function pausedTurn(ctx: EngineContext, tenantId: string, messageId: string) {
  // A customer's message: a simulated turn never pauses (its case's overrides answer its calls).
  const message = await ctx.conversations.findMessage(tenantId, messageId);
  if (!message) throw new NotFoundError('message', messageId);
  const turn = await ctx.db
    .selectFrom('agent_turns')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .executeTakeFirst();
  if (!turn) throw new ConflictError('This message is not an agent turn; only a paused turn can be continued.');
  if (message.status === 'ABANDONED') {
    throw new ConflictError('This turn was abandoned when a new message was sent in the conversation.');
  }
  if (turn.mode !== 'pause' || message.status !== 'WAITING_CLIENT') {
    throw new ConflictError(
      turn.mode !== 'pause' && message.status === 'WAITING_CLIENT'
        ? 'This turn was not paused: it resumes by itself when the function results arrive.'
        : `This turn is not paused (status ${message.status}).`,
    );
  }
  const calls = await ctx.db
    .selectFrom('function_calls')
    .select(['call_id', 'status', 'type'])
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .orderBy('position')
    .execute();
  const pending = calls.filter((call) => call.status === 'pending');
  if (pending.length > 0) {
    throw new ConflictError(
      `The turn resumes when every call has a result; still missing: ${pending.map((p) => p.call_id).join(', ')}.`,
    );
  }
  return { message, turn, calls };
}

/** Claims the conversation for the paused turn in `trx` and marks it running, with its functions and context. */
async function claimPaused(
  ctx: EngineContext,
  trx: Transaction<Database>,
  ids: { tenantId: string; messageId: string; conversationId: string },
  clientFunctions: ClientFunction[],
  context: Record<string, unknown> | null,
) {
  const { tenantId, messageId } = ids;
  await claim(ctx, trx, tenantId, ids.conversationId, messageId);
  const resumed = await trx
    .updateTable('messages')
    .set({ status: 'IN_PROGRESS', updated_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', messageId)
    .where('status', '=', 'WAITING_CLIENT')
    .returning('id')
    .executeTakeFirst();
  if (!resumed) throw new ConflictError('This turn is no longer paused.');
  await trx
    .updateTable('agent_turns')
    .set({ client_functions: JSON.stringify(clientFunctions), context: JSON.stringify(context) })
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .execute();
}

/** Adds the results of the turn's last step to its items, streaming those of `clientCalls`. */
async function useResults(ctx: EngineContext, rt: Runtime, clientCalls: Set<string>) {
  const last = [...rt.state.items].reverse().find((item) => item.type === 'assistant');
  if (last?.type !== 'assistant') return;
  const results = await resultItems(ctx, rt, last.calls);
  for (const item of results) {
    if (item.type === 'result' && clientCalls.has(item.call_id)) useClientResult(rt, item);
  }
  rt.state.items.push(...results);
}
