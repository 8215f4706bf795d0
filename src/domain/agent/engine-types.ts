// What the turn engine is given and what its callers send and get back (./engine.ts).
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import type { AgentService } from '../conversations/agents.js';
import type { ConversationService, MessageRecord } from '../conversations/conversations.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { TraceOptions } from './turn-trace.js';
import type { ClientFunction, Passage, Provider, TurnEvent } from './types.js';

export type ClientFunctionsMode = 'wait' | 'pause';

export interface SendMessageInput {
  conversation_id?: string | undefined;
  agent_id?: string | undefined;
  content: string;
  hidden?: boolean | undefined;
  client_functions?: ClientFunction[] | undefined;
  client_functions_mode?: ClientFunctionsMode | undefined;
  language?: string | undefined;
  context?: Record<string, unknown> | undefined;
}

export interface ContinueInput {
  client_functions?: ClientFunction[] | undefined;
  context?: Record<string, unknown> | undefined;
}

export interface TurnOptions {
  /**
   * Receives every stream event; its failures never affect the turn. A turn with a listener is
   * streamed: it holds one of its tenant's stream places (`maxStreamsPerTenant`) until it ends.
   */
  onEvent?: ((event: TurnEvent) => void) | undefined;
  /**
   * Outputs by tool name that replace running the tool (simulations' `tool_call_overrides`):
   * a workflow is then not run (its run is recorded as overridden) and a client function is not
   * asked for. The call itself is recorded as usual.
   */
  toolOverrides?: Record<string, unknown> | undefined;
  /**
   * Runs in the transaction that creates a new conversation, so what it writes exists exactly when
   * the conversation does (a simulation marks its conversations there: nothing ever reads one
   * unmarked).
   */
  onConversationCreated?: ((trx: Transaction<Database>, conversationId: string) => Promise<void>) | undefined;
}

export interface RunningTurn {
  messageId: string;
  conversationId: string;
  /** The agent message once the turn ends, or once it waits for client results (not paused). */
  settled: Promise<MessageRecord>;
  /** The agent message once the turn ends (COMPLETED, WAITING_CLIENT paused, or FAILED). */
  finished: Promise<MessageRecord>;
}

export interface FunctionResultsAck {
  object: 'function_results';
  message_id: string;
  conversation_id: string;
  received_call_ids: string[];
  pending_call_ids: string[];
  ready: boolean;
}

export interface AgentEngineDeps {
  db: Db;
  provider: Provider;
  agents: AgentService;
  conversations: ConversationService;
  /** Knowledge search (src/domain/knowledge/search.ts), injected. */
  searchKnowledge: (
    tenantId: string,
    query: string,
    options?: { language?: string; limit?: number },
  ) => Promise<Passage[]>;
  /** Records a knowledge update request (knowledge gap), injected. */
  recordGap: (
    tenantId: string,
    gap: { question: string; conversation_id?: string; message_id?: string; proposed_answer?: string },
  ) => Promise<unknown>;
  clientFunctionTimeoutMs: number;
  /** Streamed turns one tenant may run at once in this process; unset, no cap. */
  maxStreamsPerTenant?: number;
  /** Turns of one tenant this process may hold waiting for client results; unset, no cap. */
  maxWaitingPerTenant?: number;
  leaseMs?: number;
  minRank?: number;
  /** Where unexpected turn failures are reported, with the event id the message shows. */
  logError?: (error: unknown, eventId: string) => void;
  /** Webhook events (src/domain/webhooks/events.ts): `conversation.turn.waiting_client`. */
  emitEvent?: EmitEvent;
  /**
   * The simulations' engine (src/domain/simulations/index.ts): a message may continue a
   * conversation a simulation case is playing. Every other engine, the one customers reach,
   * answers 404 for those conversations, their messages and turns, as for any unknown id.
   */
  playsSimulations?: boolean;
  /** What turn traces may hold and what calls cost (MODEL_PRICES, TRACE_PROMPTS, the provider's key). */
  trace?: TraceOptions;
}
