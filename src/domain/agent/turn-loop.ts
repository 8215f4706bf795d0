// The turn loop: provider steps until the agent answers without calling a tool, the turn pauses for
// its client, or it fails. Whatever happens, the turn's end is written, its conversation freed and
// `done` emitted. No transaction is held across a provider call.

import { newId } from '../../lib/ids.js';
import type { MessageRecord } from '../conversations/conversations.js';
import { KnowledgeSearchFailure } from '../knowledge/text-search.js';
import { askClient } from './client-functions.js';
import { release, renewLease } from './conversation-lease.js';
import { findPassages } from './retrieval.js';
import { type Deferred, type EngineContext, lastInput, type Runtime, TurnFailure } from './turn-runtime.js';
import { handOff, resultItems, type TurnEnd, writeTurnEnd } from './turn-store.js';
import { announceCalls, answerCalls, toolsFor } from './turn-tools.js';
import { type HandoffTarget, ProviderError, type StepResult, type ToolSpec } from './types.js';

/** Provider steps per turn, a guard against a model that calls tools forever. */
export const MAX_STEPS = 8;

/** Runs the turn to its end, writes its result, frees the conversation, emits `done`. */
export function launch(ctx: EngineContext, rt: Runtime, settled: Deferred<MessageRecord>): Promise<MessageRecord> {
  const stopRenewing = renewLease(ctx, rt.tenantId, rt.conversationId, rt.messageId);
  const run = (async () => {
    const played = await play(ctx, rt);
    let end: TurnEnd;
    try {
      end = await writeTurnEnd(ctx, rt, played);
    } finally {
      stopRenewing();
    }
    rt.trace.report(end.status);
    const record = await ctx.conversations.turnMessage(rt.tenantId, rt.messageId);
    rt.emit('done', { status: end.status, ...(end.error ? { error: end.error } : {}), message: record });
    settled.resolve(record);
    return record;
  })();
  run.catch((caught) => {
    settled.reject(caught);
    // Last resort: the database is gone. Free the conversation if we can.
    release(ctx.db, rt).catch(() => undefined);
  });
  ctx.running.add(run);
  run
    .finally(() => ctx.running.delete(run))
    .catch(() => {
      /* reported through `finished` */
    });
  return run;
}

/** Plays the turn: its passages on the first step, then the loop; a failure becomes the turn's error. */
async function play(ctx: EngineContext, rt: Runtime): Promise<TurnEnd> {
  try {
    if (rt.state.steps === 0 && rt.state.passages.length === 0) await findPassages(ctx, rt);
    return { status: await drive(ctx, rt), error: null };
  } catch (caught) {
    if (caught instanceof ProviderError || caught instanceof TurnFailure || caught instanceof KnowledgeSearchFailure) {
      return { status: 'FAILED', error: { code: caught.code, message: caught.message } };
    }
    const eventId = newId();
    ctx.logError(caught, eventId);
    return {
      status: 'FAILED',
      error: { code: 'internal_error', message: `The turn failed unexpectedly; it was logged (event ${eventId}).` },
    };
  }
}

async function drive(ctx: EngineContext, rt: Runtime): Promise<'COMPLETED' | 'WAITING_CLIENT'> {
  const handoffAgents = await ctx.agents.handoffTargets(rt.tenantId, rt.agent);
  for (;;) {
    if (rt.state.steps >= MAX_STEPS) {
      throw new TurnFailure('too_many_steps', `The agent made more than ${MAX_STEPS} steps in one turn.`);
    }
    rt.state.steps += 1;
    const tools = await toolsFor(ctx, rt, handoffAgents);
    const step = await callProvider(ctx, rt, tools, handoffAgents);
    await takeAnswer(ctx, rt, step);
    if (step.calls.length === 0) return 'COMPLETED';

    rt.state.items.push({ type: 'assistant', text: step.text, calls: step.calls });
    const byName = new Map(tools.map((t) => [t.name, t]));
    await announceCalls(ctx, rt, step.calls, byName);
    const clientPending = await answerCalls(ctx, rt, step.calls, byName, handoffAgents);
    if (clientPending.length > 0 && (await askClient(ctx, rt, clientPending)) === 'paused') return 'WAITING_CLIENT';
    rt.state.items.push(...(await resultItems(ctx, rt, step.calls)));
  }
}

function callProvider(
  ctx: EngineContext,
  rt: Runtime,
  tools: ToolSpec[],
  handoffAgents: HandoffTarget[],
): Promise<StepResult> {
  return rt.trace.providerCall(rt.state.steps, () =>
    ctx.provider.step({
      instructions: rt.agent.instructions,
      agentName: rt.agent.name,
      history: rt.state.history,
      items: rt.state.items,
      tools,
      passages: rt.state.passages,
      handoffAgents,
      context: rt.context,
      language: rt.state.language,
      onDelta: (delta) => rt.emit('message.delta', { delta }),
      signal: ctx.shutdown,
    }),
  );
}

/** Keeps the step's text and new citations, and follows its handoff and knowledge gap. */
async function takeAnswer(ctx: EngineContext, rt: Runtime, step: StepResult) {
  if (step.text !== '') rt.state.texts.push(step.text);
  for (const citation of step.citations) {
    if (rt.state.citations.some((c) => c.document_id === citation.document_id)) continue;
    rt.state.citations.push(citation);
    rt.emit('citation', { citation });
  }
  if (step.handoffTo) await handOff(ctx, rt, step.handoffTo, lastInput(rt));
  if (step.knowledgeGap) rt.trace.knowledgeGap(await recordGap(ctx, rt));
}

/** Records the turn's question as a knowledge gap; whether it was recorded. */
async function recordGap(ctx: EngineContext, rt: Runtime): Promise<boolean> {
  const input = rt.state.items.find((item) => item.type === 'input');
  const question = lastInput(rt).trim();
  // A gap is a customer's question (rule 4); an application event is not one.
  if (question === '' || input?.type !== 'input' || input.author !== 'customer') return false;
  // Best effort: the customer still gets the agent's answer if the gap cannot be recorded.
  try {
    await ctx.deps.recordGap(rt.tenantId, {
      question,
      conversation_id: rt.conversationId,
      message_id: rt.state.input_message_id,
    });
    return true;
  } catch (error) {
    ctx.deps.logError?.(error, newId());
    return false;
  }
}
