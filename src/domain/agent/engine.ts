// The turn engine (DESIGN.md §8): one customer message in, the agent's turn out, for every
// provider. It owns the rules around the provider's steps:
// - one turn at a time per conversation: a turn claims the conversation atomically
//   (`conversations.active_turn_id`, with a lease it renews while it runs, so a turn whose
//   process died frees the conversation once the lease lapses); a second message sent while a
//   turn runs is refused with 409 `conflict`. No transaction is ever held across a provider call.
// - tools: client functions (run by the application), enabled workflows (run here, recorded in
//   `workflow_runs`), and `transfer_to_agent` for the agent's handoff agents;
// - client functions in pause mode: the turn stores its state (`agent_turns`, `function_calls`),
//   ends WAITING_CLIENT and resumes through `continueTurn` once every call has a result; a new
//   message abandons it. In the default mode (`wait`) the turn itself waits for the results
//   (posted to the same function-results endpoint) for CLIENT_FUNCTION_TIMEOUT_MS;
// - per-tenant caps in this process on streamed and waiting turns (src/domain/agent/turn-places.ts): a
//   request over a cap is refused before anything is stored; a turn that comes to wait while its
//   tenant's places are all taken (turns started together) ends FAILED with `turn_limit_exceeded`;
// - the turn's result is written to the database whatever happens to the client that asked.
//
// This module wires the engine's parts: a message starts a turn (./start-turn.ts), a paused turn
// resumes (./resume-turn.ts), both run in the turn loop (./turn-loop.ts) with its tools
// (./turn-tools.ts), client functions (./client-functions.ts), conversation lease
// (./conversation-lease.ts) and writes (./turn-store.ts).

import { setMaxListeners } from 'node:events';
import type { MessageRecord } from '../conversations/conversations.js';
import { submitFunctionResults } from './client-functions.js';
import { DEFAULT_LEASE_MS } from './conversation-lease.js';
import type { AgentEngineDeps, ContinueInput, SendMessageInput, TurnOptions } from './engine-types.js';
import { continueTurn } from './resume-turn.js';
import { MIN_ANSWER_RANK, retrieve } from './retrieval.js';
import { sendMessage } from './start-turn.js';
import { createTurnPlaces } from './turn-places.js';
import type { EngineContext } from './turn-runtime.js';
import { createTurnWakeups } from './turn-wakeups.js';

export type {
  AgentEngineDeps,
  ClientFunctionsMode,
  ContinueInput,
  FunctionResultsAck,
  RunningTurn,
  SendMessageInput,
  TurnOptions,
} from './engine-types.js';
export { MIN_ANSWER_RANK, PASSAGE_LIMIT, type Retrieval } from './retrieval.js';
export { MAX_STEPS } from './turn-loop.js';
export { HISTORY_LIMIT } from './turn-store.js';
export { checkClientFunctions, HANDOFF_TOOL } from './turn-tools.js';

/** How often the turns waiting for client results are checked for results sent to another instance. */
const POLL_MS = 200;

export function createAgentEngine(deps: AgentEngineDeps) {
  const shutdown = new AbortController();
  // Every running turn listens to it (its waits, its provider calls): no cap on listeners.
  setMaxListeners(0, shutdown.signal);
  const wakeups = createTurnWakeups(shutdown.signal);
  const ctx: EngineContext = {
    deps,
    db: deps.db,
    provider: deps.provider,
    agents: deps.agents,
    conversations: deps.conversations,
    leaseMs: deps.leaseMs ?? DEFAULT_LEASE_MS,
    minRank: deps.minRank ?? MIN_ANSWER_RANK,
    traceOptions: deps.trace ?? { prices: {}, storePrompts: false, secrets: [] },
    shutdown: shutdown.signal,
    /** Per-tenant caps on streamed and waiting turns; the waiting ones woken by results sent elsewhere. */
    places: createTurnPlaces({
      db: deps.db,
      maxStreams: deps.maxStreamsPerTenant,
      maxWaiting: deps.maxWaitingPerTenant,
      pollMs: POLL_MS,
      wake: wakeups.notify,
    }),
    wakeups,
    running: new Set(),
    logError: deps.logError ?? logToStderr,
  };
  const send = (tenantId: string, input: SendMessageInput, options: TurnOptions = {}) =>
    sendMessage(ctx, tenantId, input, options);

  return {
    provider: deps.provider.name,
    sendMessage: send,
    submitFunctionResults: (tenantId: string, messageId: string, results: { call_id: string; output: unknown }[]) =>
      submitFunctionResults(ctx, tenantId, messageId, results),
    continueTurn: (tenantId: string, messageId: string, input: ContinueInput, options: TurnOptions = {}) =>
      continueTurn(ctx, tenantId, messageId, input, options),
    retrieve: (
      tenantId: string,
      question: string,
      options: { language?: string | null | undefined; limit?: number } = {},
    ) => retrieve(ctx, tenantId, question, options),
    /** Runs one whole turn without HTTP (simulations, coverage) and returns the agent message. */
    async runTurn(tenantId: string, input: SendMessageInput, options: TurnOptions = {}): Promise<MessageRecord> {
      const turn = await send(tenantId, input, options);
      return turn.finished;
    },
    /** Stops waiting turns and provider calls; running turns end FAILED. */
    async close(): Promise<void> {
      shutdown.abort();
      await Promise.allSettled([...ctx.running]);
      ctx.places.close();
    },
  };
}

export type AgentEngine = ReturnType<typeof createAgentEngine>;

function logToStderr(error: unknown, eventId: string) {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`${JSON.stringify({ level: 50, event_id: eventId, msg: 'agent turn failed', message })}\n`);
}
