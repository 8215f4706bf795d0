// What the engine's modules share: the engine's parts (EngineContext), a turn's stored state, the
// turn as it runs in this process (Runtime), and the failure that ends a turn with its own reason.
import type { Db } from '../../db/index.js';
import type { AgentRow, AgentService } from '../conversations/agents.js';
import type { ConversationService, MessageRecord } from '../conversations/conversations.js';
import type { AgentEngineDeps, ClientFunctionsMode, TurnOptions } from './engine-types.js';
import { type EmitTurnEvent, turnEmitter } from './turn-events.js';
import type { createTurnPlaces } from './turn-places.js';
import { createTurnTrace, newTraceData, type TraceOptions, type TurnTrace } from './turn-trace.js';
import type { TurnWakeups } from './turn-wakeups.js';
import type { Citation, ClientFunction, HistoryMessage, Passage, Provider, TurnItem } from './types.js';

/** The engine's parts, built once by `createAgentEngine` and handed to every step of a turn. */
export interface EngineContext {
  deps: AgentEngineDeps;
  db: Db;
  provider: Provider;
  agents: AgentService;
  conversations: ConversationService;
  leaseMs: number;
  minRank: number;
  traceOptions: TraceOptions;
  /** Aborts on close: every running turn listens to it (its waits, its provider calls). */
  shutdown: AbortSignal;
  /** Per-tenant caps on streamed and waiting turns. */
  places: ReturnType<typeof createTurnPlaces>;
  wakeups: TurnWakeups;
  /** The turns running in this process, awaited on close. */
  running: Set<Promise<unknown>>;
  /** Where unexpected turn failures are reported: `deps.logError`, else stderr. */
  logError: (error: unknown, eventId: string) => void;
}

/** A turn's state, stored in `agent_turns.state` so that a paused turn resumes where it stopped. */
export interface TurnState {
  input_message_id: string;
  history: HistoryMessage[];
  items: TurnItem[];
  passages: Passage[];
  texts: string[];
  citations: Citation[];
  handoff: { agent_id: string; agent_name: string; ticket_id: string } | null;
  steps: number;
  language: string | null;
  tool_overrides: Record<string, unknown> | null;
  /** Outputs of calls the engine answered itself (handoff tool, unknown tools), by call id. */
  inline_results: Record<string, unknown>;
}

export interface Runtime {
  tenantId: string;
  messageId: string;
  conversationId: string;
  agent: AgentRow;
  mode: ClientFunctionsMode;
  clientFunctions: ClientFunction[];
  context: Record<string, unknown> | null;
  state: TurnState;
  /** Records the turn's steps for its trace (./turn-trace.ts). */
  trace: TurnTrace;
  emit: EmitTurnEvent;
  onWaiting: () => void;
}

export class TurnFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** The agent message once the turn settles; never an unhandled rejection when nobody waits for it. */
export function settlement(): Deferred<MessageRecord> {
  const settled = deferred<MessageRecord>();
  settled.promise.catch(() => undefined);
  return settled;
}

export function newTrace(ctx: EngineContext, question: string, language: string | null): TurnTrace {
  const { provider, traceOptions } = ctx;
  return createTurnTrace(provider, traceOptions, newTraceData(provider, question, language, traceOptions.storePrompts));
}

/** The turn's runtime: its events go to the options' listener, and it settles once it waits. */
export function runtimeFor(
  ctx: EngineContext,
  base: Omit<Runtime, 'emit' | 'onWaiting'>,
  options: TurnOptions,
  settled: Deferred<MessageRecord>,
): Runtime {
  return {
    ...base,
    emit: turnEmitter(options, base.messageId, base.conversationId),
    onWaiting: () => {
      ctx.conversations.turnMessage(base.tenantId, base.messageId).then(settled.resolve, settled.reject);
    },
  };
}

/** The turn's input: the customer's message or the application's event. */
export function lastInput(rt: Runtime): string {
  const input = rt.state.items.find((i) => i.type === 'input');
  return input?.type === 'input' ? input.content : '';
}
