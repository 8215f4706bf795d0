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
// - per-tenant caps in this process on streamed and waiting turns (src/agent/turn-places.ts): a
//   request over a cap is refused before anything is stored; a turn that comes to wait while its
//   tenant's places are all taken (turns started together) ends FAILED with `turn_limit_exceeded`;
// - the turn's result is written to the database whatever happens to the client that asked.

import { setMaxListeners } from 'node:events';
import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/client.js';
import type { Database } from '../db/schema.js';
import type { AgentRow, AgentService } from '../domain/conversations/agents.js';
import {
  type ConversationService,
  isCustomerConversation,
  type MessageRecord,
} from '../domain/conversations/conversations.js';
import {
  ConflictError,
  DomainError,
  InvalidParametersError,
  MissingParameterError,
  NotFoundError,
  ValidationError,
} from '../domain/errors.js';
import { KnowledgeSearchFailure } from '../domain/knowledge/text-search.js';
import type { EmitEvent } from '../domain/webhooks/events.js';
import { newId } from '../lib/ids.js';
import { argumentsSchemaProblem, compileClientSchema, schemaErrorsText } from '../lib/json-schema.js';
import { loadTraceData, saveTrace } from './trace-store.js';
import { createTurnPlaces } from './turn-places.js';
import { createTurnTrace, newTraceData, type TraceOptions, type TurnTrace } from './turn-trace.js';
import {
  type Citation,
  type ClientFunction,
  type HandoffTarget,
  type HistoryMessage,
  type Passage,
  type Provider,
  ProviderError,
  type ToolCall,
  type ToolSpec,
  type TurnEvent,
  type TurnItem,
} from './types.js';

/** Passages ranked below this are not used to answer (built-in rule 4 then applies). */
export const MIN_ANSWER_RANK = 0.1;
/** How many passages a turn retrieves. */
export const PASSAGE_LIMIT = 5;
/** Provider steps per turn, a guard against a model that calls tools forever. */
export const MAX_STEPS = 8;
/** Earlier messages a provider sees. */
export const HISTORY_LIMIT = 20;
/** The engine's own tool for handoffs (a client function may not take its name). */
export const HANDOFF_TOOL = 'transfer_to_agent';
const DEFAULT_LEASE_MS = 60_000;
/** How often the turns waiting for client results are checked for results sent to another instance. */
const POLL_MS = 200;

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

export interface Retrieval {
  object: 'retrieval';
  question: string;
  language: string | null;
  threshold: number;
  /** Passages at or above the threshold, best first. */
  passages: Passage[];
  answerable: boolean;
}

interface TurnState {
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

interface Runtime {
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
  emit: (type: TurnEvent['type'], data?: Record<string, unknown>) => void;
  onWaiting: () => void;
}

class TurnFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
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

/** Validates client functions: unique names, not the engine's own, parameters a JSON Schema of an object. */
export function checkClientFunctions(functions: ClientFunction[] | undefined, param = 'client_functions'): void {
  const seen = new Set<string>();
  (functions ?? []).forEach((fn, i) => {
    if (fn.name === HANDOFF_TOOL) {
      throw new ValidationError(`${param}[${i}].name`, `'${HANDOFF_TOOL}' is reserved for the agent's handoffs.`);
    }
    if (seen.has(fn.name)) {
      throw new ValidationError(`${param}[${i}].name`, `Two client functions are named '${fn.name}'.`);
    }
    seen.add(fn.name);
    if (fn.parameters === undefined) return;
    const problem = argumentsSchemaProblem(fn.parameters, `${param}[${i}].parameters`);
    if (problem !== undefined) throw new ValidationError(`${param}[${i}].parameters`, problem);
  });
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const leaseUntil = (ms: number) => sql<Date>`now() + ${ms} * interval '1 millisecond'`;

export function createAgentEngine(deps: AgentEngineDeps) {
  const { db, provider, agents, conversations } = deps;
  const leaseMs = deps.leaseMs ?? DEFAULT_LEASE_MS;
  const minRank = deps.minRank ?? MIN_ANSWER_RANK;
  const traceOptions: TraceOptions = deps.trace ?? { prices: {}, storePrompts: false, secrets: [] };
  const newTrace = (question: string, language: string | null) =>
    createTurnTrace(provider, traceOptions, newTraceData(provider, question, language, traceOptions.storePrompts));
  const shutdown = new AbortController();
  // Every running turn listens to it (its waits, its provider calls): no cap on listeners.
  setMaxListeners(0, shutdown.signal);
  /** In-process wake-ups for turns waiting on client results (results sent elsewhere: src/agent/turn-places.ts). */
  const waiters = new Map<string, Set<() => void>>();
  const running = new Set<Promise<unknown>>();

  const logError =
    deps.logError ??
    ((error: unknown, eventId: string) => {
      const message = error instanceof Error ? error.message : String(error);
      process.stderr.write(`${JSON.stringify({ level: 50, event_id: eventId, msg: 'agent turn failed', message })}\n`);
    });

  function notify(messageId: string) {
    for (const wake of waiters.get(messageId) ?? []) wake();
  }

  /** Per-tenant caps on streamed and waiting turns; the waiting ones woken by results sent elsewhere. */
  const places = createTurnPlaces({
    db,
    maxStreams: deps.maxStreamsPerTenant,
    maxWaiting: deps.maxWaitingPerTenant,
    pollMs: POLL_MS,
    wake: notify,
  });

  function sleepUnlessWoken(messageId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const set = waiters.get(messageId) ?? new Set();
      waiters.set(messageId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) waiters.delete(messageId);
        shutdown.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      shutdown.signal.addEventListener('abort', done, { once: true });
    });
  }

  // ---- retrieval -------------------------------------------------------------------------

  async function retrieve(
    tenantId: string,
    question: string,
    options: { language?: string | null | undefined; limit?: number } = {},
  ): Promise<Retrieval> {
    const language = options.language ?? null;
    const passages = relevant(await search(tenantId, question, language, options.limit));
    return { object: 'retrieval', question, language, threshold: minRank, passages, answerable: passages.length > 0 };
  }

  /** Every passage the knowledge search found, best first. */
  async function search(tenantId: string, question: string, language: string | null, limit = PASSAGE_LIMIT) {
    const found = await deps.searchKnowledge(tenantId, question, { ...(language ? { language } : {}), limit });
    return found.sort((a, b) => b.rank - a.rank);
  }

  const relevant = (found: Passage[]) => found.filter((p) => p.rank >= minRank);

  // ---- claiming a conversation -----------------------------------------------------------

  /**
   * Claims the conversation for a turn inside `trx` (row locked): refuses while another turn
   * holds an unexpired lease, and fails a turn whose lease lapsed (its process died).
   */
  async function claim(trx: Transaction<Database>, tenantId: string, conversationId: string, turnId: string) {
    const row = await trx
      .selectFrom('conversations')
      .selectAll()
      .select(sql<boolean>`active_turn_id is not null and active_turn_expires_at > now()`.as('busy'))
      .where('tenant_id', '=', tenantId)
      .where('id', '=', conversationId)
      .$if(!deps.playsSimulations, (query) => query.where(isCustomerConversation(tenantId, 'id')))
      .forUpdate()
      .executeTakeFirst();
    if (!row) throw new NotFoundError('conversation', conversationId);
    if (row.busy) {
      throw new ConflictError(
        'The agent is still answering the previous message of this conversation; send this one when that turn ends.',
      );
    }
    if (row.active_turn_id !== null) {
      await trx
        .updateTable('messages')
        .set({
          status: 'FAILED',
          error: JSON.stringify({
            code: 'turn_interrupted',
            message: 'The server stopped while the agent was answering.',
          }),
          updated_at: new Date(),
        })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', row.active_turn_id)
        .where('status', 'in', ['IN_PROGRESS', 'WAITING_CLIENT'])
        .execute();
    }
    await trx
      .updateTable('conversations')
      .set({ active_turn_id: turnId, active_turn_expires_at: leaseUntil(leaseMs), updated_at: new Date() })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', conversationId)
      .execute();
    return row;
  }

  /** Frees the turn's conversation (with `executor`, the transaction that writes the turn's end, or the pool). */
  async function release(executor: Db, rt: Runtime) {
    await executor
      .updateTable('conversations')
      .set({ active_turn_id: null, active_turn_expires_at: null, updated_at: new Date() })
      .where('tenant_id', '=', rt.tenantId)
      .where('id', '=', rt.conversationId)
      .where('active_turn_id', '=', rt.messageId)
      .execute();
  }

  function renewLease(tenantId: string, conversationId: string, turnId: string): () => void {
    const timer = setInterval(
      () => {
        db.updateTable('conversations')
          .set({ active_turn_expires_at: leaseUntil(leaseMs) })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', conversationId)
          .where('active_turn_id', '=', turnId)
          .execute()
          .catch(() => {
            /* the next renewal retries; a lapsed lease only lets a later turn take over */
          });
      },
      Math.max(50, Math.floor(leaseMs / 3)),
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  // ---- tools -----------------------------------------------------------------------------

  async function toolsFor(rt: Runtime, handoffAgents: HandoffTarget[]): Promise<ToolSpec[]> {
    const clientNames = new Set(rt.clientFunctions.map((f) => f.name));
    const workflows = await db
      .selectFrom('workflows')
      .select(['name', 'description', 'input_schema'])
      .where('tenant_id', '=', rt.tenantId)
      .where('enabled', '=', true)
      .orderBy('name')
      .execute();
    const tools: ToolSpec[] = [
      ...rt.clientFunctions.map(
        (fn): ToolSpec => ({
          name: fn.name,
          description: fn.description ?? '',
          parameters: fn.parameters ?? { type: 'object', properties: {} },
          type: 'client',
        }),
      ),
      ...workflows
        .filter((wf) => !clientNames.has(wf.name))
        .map(
          (wf): ToolSpec => ({
            name: wf.name,
            description: wf.description ?? '',
            parameters: wf.input_schema ?? { type: 'object', properties: {} },
            type: 'workflow',
          }),
        ),
    ];
    if (handoffAgents.length > 0) {
      tools.push({
        name: HANDOFF_TOOL,
        description: 'Hand the conversation over to another agent.',
        parameters: {
          type: 'object',
          properties: { agent_name: { type: 'string', enum: handoffAgents.map((a) => a.name) } },
          required: ['agent_name'],
        },
        type: 'internal',
      });
    }
    return tools;
  }

  /** Runs an enabled workflow server-side: records a run and answers with its outcome. */
  async function runWorkflow(
    rt: Runtime,
    call: ToolCall,
  ): Promise<{ status: 'completed' | 'failed'; output: unknown }> {
    const workflow = await db
      .selectFrom('workflows')
      .select(['id', 'name', 'input_schema'])
      .where('tenant_id', '=', rt.tenantId)
      .where('name', '=', call.name)
      .where('enabled', '=', true)
      .executeTakeFirst();
    if (!workflow) return { status: 'failed', output: { error: `The workflow '${call.name}' is not enabled.` } };
    const overrides = rt.state.tool_overrides;
    const overridden = overrides !== null && Object.hasOwn(overrides, call.name);
    const runId = newId();
    let status: 'completed' | 'failed' = 'completed';
    let output: unknown;
    if (overridden) {
      output = overrides[call.name];
    } else {
      let problem: string | undefined;
      if (workflow.input_schema) {
        try {
          const validate = compileClientSchema(workflow.input_schema);
          if (!validate(call.arguments)) problem = schemaErrorsText(validate.errors);
        } catch (error) {
          problem = `its input schema cannot be used (${error instanceof Error ? error.message : String(error)})`;
        }
      }
      if (problem !== undefined) {
        status = 'failed';
        output = { error: `Invalid arguments for workflow '${workflow.name}': ${problem}` };
      } else {
        output = { workflow_run_id: runId, workflow: workflow.name, status: 'completed', arguments: call.arguments };
      }
    }
    await db
      .insertInto('workflow_runs')
      .values({
        id: runId,
        tenant_id: rt.tenantId,
        workflow_id: workflow.id,
        workflow_name: workflow.name,
        conversation_id: rt.conversationId,
        message_id: rt.messageId,
        call_id: call.call_id,
        arguments: JSON.stringify(call.arguments),
        status,
        output: JSON.stringify(output ?? null),
        overridden,
      })
      .execute();
    return { status, output };
  }

  async function handOff(rt: Runtime, target: HandoffTarget, reason: string) {
    const ticketId = newId();
    await db.transaction().execute(async (trx) => {
      // The conversation first, as every write of a turn (lockConversation, below).
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

  /**
   * Locks the turn's conversation row in `trx` before the turn's own rows are written. Deleting a
   * conversation (a simulation dataset deleted mid-run deletes the ones its runs play) locks it
   * and then, by cascade, its messages and their turns; a write holding the turn's message while
   * it waits for the conversation would deadlock with that delete. Taken first, it waits instead.
   */
  async function lockConversation(trx: Db, rt: Runtime) {
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
    await writeTrace(trx, rt, status, (final?.error as { code: string; message: string } | null) ?? null);
  }

  /** Writes the turn's trace as it stands, with the state written beside it. */
  async function writeTrace(trx: Db, rt: Runtime, status: string, error: { code: string; message: string } | null) {
    rt.trace.settle(status, error, rt.state);
    const owner = { tenantId: rt.tenantId, messageId: rt.messageId, conversationId: rt.conversationId };
    await saveTrace(trx, { ...owner, agentId: rt.agent.id }, rt.trace, status);
  }

  async function saveState(
    rt: Runtime,
    status: 'IN_PROGRESS' | 'WAITING_CLIENT',
    waitingFor: { call_id: string; name: string; arguments: unknown }[] = [],
  ) {
    await db.transaction().execute(async (trx) => {
      await writeTurn(trx, rt, status);
      // Webhook event, committed with the state it reports.
      if (status === 'WAITING_CLIENT' && deps.emitEvent) {
        await deps.emitEvent(trx, rt.tenantId, 'conversation.turn.waiting_client', {
          conversation_id: rt.conversationId,
          message_id: rt.messageId,
          function_calls: waitingFor.map((c) => ({ call_id: c.call_id, name: c.name, arguments: c.arguments })),
        });
      }
    });
  }

  async function holdsClaim(rt: Runtime): Promise<boolean> {
    const row = await db
      .selectFrom('conversations')
      .select('id')
      .where('tenant_id', '=', rt.tenantId)
      .where('id', '=', rt.conversationId)
      .where('active_turn_id', '=', rt.messageId)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Waits (default mode) until every listed client call has a result, or the timeout. */
  async function awaitClientResults(rt: Runtime, callIds: string[]) {
    const deadline = Date.now() + deps.clientFunctionTimeoutMs;
    for (;;) {
      const pending = await db
        .selectFrom('function_calls')
        .select('call_id')
        .where('tenant_id', '=', rt.tenantId)
        .where('message_id', '=', rt.messageId)
        .where('call_id', 'in', callIds)
        .where('status', '=', 'pending')
        .execute();
      if (pending.length === 0) return;
      if (!(await holdsClaim(rt))) {
        throw new TurnFailure('turn_interrupted', 'The turn lost its conversation to a newer turn.');
      }
      if (shutdown.signal.aborted) throw new TurnFailure('server_shutdown', 'The server is shutting down.');
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new TurnFailure(
          'client_timeout',
          `The client did not send the results of ${pending.map((p) => p.call_id).join(', ')} within ${deps.clientFunctionTimeoutMs} ms.`,
        );
      }
      // Woken by results sent to this process, by the turn places' check (results sent to another instance,
      // a newer turn), by shutdown, or at the deadline.
      await sleepUnlessWoken(rt.messageId, left);
    }
  }

  async function resultItems(rt: Runtime, calls: ToolCall[]): Promise<TurnItem[]> {
    const rows = await db
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

  // ---- the loop --------------------------------------------------------------------------

  type Outcome = { status: 'COMPLETED' | 'WAITING_CLIENT' };

  async function drive(rt: Runtime): Promise<Outcome> {
    const handoffAgents = await agents.handoffTargets(rt.tenantId, rt.agent);
    for (;;) {
      if (rt.state.steps >= MAX_STEPS) {
        throw new TurnFailure('too_many_steps', `The agent made more than ${MAX_STEPS} steps in one turn.`);
      }
      rt.state.steps += 1;
      const tools = await toolsFor(rt, handoffAgents);
      const step = await rt.trace.providerCall(rt.state.steps, () =>
        provider.step({
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
          signal: shutdown.signal,
        }),
      );
      if (step.text !== '') rt.state.texts.push(step.text);
      for (const citation of step.citations) {
        if (rt.state.citations.some((c) => c.document_id === citation.document_id)) continue;
        rt.state.citations.push(citation);
        rt.emit('citation', { citation });
      }
      if (step.handoffTo) await handOff(rt, step.handoffTo, lastInput(rt));
      const input = rt.state.items.find((item) => item.type === 'input');
      const question = lastInput(rt).trim();
      // A gap is a customer's question (rule 4); an application event is not one.
      let gapRecorded = false;
      if (step.knowledgeGap && question !== '' && input?.type === 'input' && input.author === 'customer') {
        // Best effort: the customer still gets the agent's answer if the gap cannot be recorded.
        try {
          await deps.recordGap(rt.tenantId, {
            question,
            conversation_id: rt.conversationId,
            message_id: rt.state.input_message_id,
          });
          gapRecorded = true;
        } catch (error) {
          deps.logError?.(error, newId());
        }
      }
      if (step.knowledgeGap) rt.trace.knowledgeGap(gapRecorded);
      if (step.calls.length === 0) return { status: 'COMPLETED' };

      rt.state.items.push({ type: 'assistant', text: step.text, calls: step.calls });
      const byName = new Map(tools.map((t) => [t.name, t]));
      const recorded = step.calls.filter((c) => {
        const type = byName.get(c.name)?.type;
        return type === 'client' || type === 'workflow';
      });
      if (recorded.length > 0) {
        const base = await db
          .selectFrom('function_calls')
          .select(sql<number>`count(*)`.as('n'))
          .where('tenant_id', '=', rt.tenantId)
          .where('message_id', '=', rt.messageId)
          .executeTakeFirstOrThrow();
        await db
          .insertInto('function_calls')
          .values(
            recorded.map((call, i) => ({
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
      rt.trace.called(recorded, (name) => byName.get(name)?.type);
      for (const call of recorded) {
        rt.emit('function_call', {
          call_id: call.call_id,
          name: call.name,
          arguments: call.arguments,
          type: byName.get(call.name)?.type,
        });
      }

      const inline = rt.state.inline_results;
      const clientPending: ToolCall[] = [];
      for (const call of step.calls) {
        const tool = byName.get(call.name);
        if (!tool) {
          inline[call.call_id] = { error: `There is no tool named '${call.name}'.` };
        } else if (tool.type === 'internal') {
          const target = handoffAgents.find((a) => a.name === call.arguments.agent_name);
          if (!target) {
            inline[call.call_id] = { error: 'agent_name must name one of the handoff agents.' };
          } else {
            await handOff(rt, target, lastInput(rt));
            inline[call.call_id] = { transferred: true, agent_name: target.name };
          }
        } else if (tool.type === 'workflow') {
          const { status, output } = await runWorkflow(rt, call);
          rt.trace.answered(call.call_id, status, output, Object.hasOwn(rt.state.tool_overrides ?? {}, call.name));
          await setCallResult(rt, call.call_id, status, output);
          rt.emit('function_result', { call_id: call.call_id, name: call.name, status, output });
        } else if (rt.state.tool_overrides && Object.hasOwn(rt.state.tool_overrides, call.name)) {
          const output = rt.state.tool_overrides[call.name];
          rt.trace.answered(call.call_id, 'completed', output, true);
          await setCallResult(rt, call.call_id, 'completed', output);
          rt.emit('function_result', { call_id: call.call_id, name: call.name, status: 'completed', output });
        } else {
          clientPending.push(call);
        }
      }

      if (clientPending.length > 0) {
        if (rt.mode === 'pause') {
          await saveState(rt, 'WAITING_CLIENT', clientPending);
          return { status: 'WAITING_CLIENT' };
        }
        const place = places.holdWaiting(rt.tenantId, rt.messageId);
        if ('full' in place) throw new TurnFailure('turn_limit_exceeded', place.full);
        const { leave } = place;
        try {
          await saveState(rt, 'WAITING_CLIENT', clientPending);
          rt.onWaiting();
          await awaitClientResults(
            rt,
            clientPending.map((c) => c.call_id),
          );
        } finally {
          leave();
        }
        await saveState(rt, 'IN_PROGRESS');
        for (const item of await resultItems(rt, clientPending)) {
          if (item.type === 'result') {
            rt.trace.answered(item.call_id, 'completed', item.output);
            rt.emit('function_result', {
              call_id: item.call_id,
              name: item.name,
              status: 'completed',
              output: item.output,
            });
          }
        }
      }
      rt.state.items.push(...(await resultItems(rt, step.calls)));
    }
  }

  async function setCallResult(rt: Runtime, callId: string, status: 'completed' | 'failed', output: unknown) {
    await db
      .updateTable('function_calls')
      .set({ status, output: JSON.stringify(output ?? null), updated_at: new Date() })
      .where('tenant_id', '=', rt.tenantId)
      .where('message_id', '=', rt.messageId)
      .where('call_id', '=', callId)
      .execute();
  }

  function lastInput(rt: Runtime): string {
    const input = rt.state.items.find((i) => i.type === 'input');
    return input?.type === 'input' ? input.content : '';
  }

  /** Runs the turn to its end, writes its result, frees the conversation, emits `done`. */
  function launch(rt: Runtime, settled: ReturnType<typeof deferred<MessageRecord>>): Promise<MessageRecord> {
    const stopRenewing = renewLease(rt.tenantId, rt.conversationId, rt.messageId);
    const run = (async () => {
      let status: 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED';
      let error: { code: string; message: string } | null = null;
      try {
        if (rt.state.steps === 0 && rt.state.passages.length === 0) {
          const [question, language] = [lastInput(rt), rt.state.language];
          const found = await rt.trace.search(question, language, minRank, () =>
            search(rt.tenantId, question, language),
          );
          rt.state.passages = relevant(found);
        }
        status = (await drive(rt)).status;
      } catch (caught) {
        status = 'FAILED';
        if (
          caught instanceof ProviderError ||
          caught instanceof TurnFailure ||
          caught instanceof KnowledgeSearchFailure
        ) {
          error = { code: caught.code, message: caught.message };
        } else {
          const eventId = newId();
          logError(caught, eventId);
          error = {
            code: 'internal_error',
            message: `The turn failed unexpectedly; it was logged (event ${eventId}).`,
          };
        }
      }
      try {
        await db.transaction().execute(async (trx) => {
          await writeTurn(trx, rt, status, { error });
          await release(trx, rt);
        });
      } catch (caught) {
        // The state cannot be stored (a value the database refuses, such as a NUL character in the
        // model's text): the turn ends FAILED without it, rather than stay in progress. If the
        // database itself is gone, this throws too, and the last resort below frees what it can.
        status = 'FAILED';
        const eventId = newId();
        logError(caught, eventId);
        error = {
          code: 'internal_error',
          message: `The turn's result could not be stored; it was logged (event ${eventId}).`,
        };
        await db.transaction().execute(async (trx) => {
          await lockConversation(trx, rt);
          await trx
            .updateTable('messages')
            .set({ status, error: JSON.stringify(error), updated_at: new Date() })
            .where('tenant_id', '=', rt.tenantId)
            .where('id', '=', rt.messageId)
            .where('status', 'in', ['IN_PROGRESS', 'WAITING_CLIENT'])
            .execute();
          await writeTrace(trx, rt, status, error);
          await release(trx, rt);
        });
      } finally {
        stopRenewing();
      }
      rt.trace.report(status);
      const record = await conversations.turnMessage(rt.tenantId, rt.messageId);
      rt.emit('done', { status, ...(error ? { error } : {}), message: record });
      settled.resolve(record);
      return record;
    })();
    run.catch((caught) => {
      settled.reject(caught);
      // Last resort: the database is gone. Free the conversation if we can.
      release(db, rt).catch(() => undefined);
    });
    running.add(run);
    run
      .finally(() => running.delete(run))
      .catch(() => {
        /* reported through `finished` */
      });
    return run;
  }

  function runtimeFor(
    base: Omit<Runtime, 'emit' | 'onWaiting'>,
    options: TurnOptions,
    settled: ReturnType<typeof deferred<MessageRecord>>,
  ): Runtime {
    const rt: Runtime = {
      ...base,
      emit: (type, data = {}) => {
        try {
          options.onEvent?.({
            type,
            data: { ...data, message_id: base.messageId, conversation_id: base.conversationId },
          });
        } catch {
          /* a broken listener must not break the turn */
        }
      },
      onWaiting: () => {
        conversations.turnMessage(base.tenantId, base.messageId).then(settled.resolve, settled.reject);
      },
    };
    return rt;
  }

  async function loadHistory(
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

  // ---- public functions ------------------------------------------------------------------

  /**
   * Sends a message: starts or continues a conversation and starts the agent's turn. Throws
   * the request's errors before anything runs; the turn itself never throws (it ends FAILED).
   */
  async function sendMessage(
    tenantId: string,
    input: SendMessageInput,
    options: TurnOptions = {},
  ): Promise<RunningTurn> {
    // A turn that may wait for client results is refused while its tenant's waiting places are taken.
    const full =
      (input.client_functions_mode ?? 'wait') === 'wait' &&
      input.client_functions?.length &&
      places.waitingFull(tenantId);
    if (full) throw new DomainError('turn_limit_exceeded', full);
    return places.streamed(tenantId, Boolean(options.onEvent), () => startMessage(tenantId, input, options));
  }

  async function startMessage(tenantId: string, input: SendMessageInput, options: TurnOptions): Promise<RunningTurn> {
    if (input.hidden && input.conversation_id === undefined) {
      throw new MissingParameterError(
        'conversation_id',
        'A hidden message needs the conversation_id of an existing conversation; it cannot start one.',
      );
    }
    checkClientFunctions(input.client_functions);
    let agent: AgentRow | undefined;
    if (input.agent_id !== undefined) {
      agent = await agents.findAgent(tenantId, input.agent_id);
      if (!agent) throw new InvalidParametersError('agent_id', `No agent '${input.agent_id}' in this workspace.`);
    }
    if (input.conversation_id === undefined) agent ??= await agents.defaultAgent(tenantId);

    const hidden = input.hidden === true;
    const inputId = newId();
    const messageId = newId();
    const mode: ClientFunctionsMode = input.client_functions_mode ?? 'wait';
    const clientFunctions = input.client_functions ?? [];
    const { conversationId, context, agentId, state } = await db.transaction().execute(async (trx) => {
      let conversationId: string;
      let language: string | null;
      let context: Record<string, unknown> | null;
      let agentId: string;
      if (input.conversation_id !== undefined) {
        const row = await claim(trx, tenantId, input.conversation_id, messageId);
        conversationId = row.id;
        language = input.language ?? row.language;
        context = input.context ?? row.context;
        agentId = agent?.id ?? row.agent_id;
        // A new message abandons a paused turn (spec: States, paused turn).
        await trx
          .updateTable('messages')
          .set({ status: 'ABANDONED', updated_at: new Date() })
          .where('tenant_id', '=', tenantId)
          .where('conversation_id', '=', conversationId)
          .where('status', '=', 'WAITING_CLIENT')
          .execute();
        await trx
          .updateTable('conversations')
          .set({
            agent_id: agentId,
            language,
            context: JSON.stringify(context),
            message_count: sql`message_count + 2`,
            last_message_at: new Date(),
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', conversationId)
          .execute();
      } else {
        conversationId = newId();
        language = input.language ?? null;
        context = input.context ?? null;
        agentId = (agent as AgentRow).id;
        await trx
          .insertInto('conversations')
          .values({
            id: conversationId,
            tenant_id: tenantId,
            agent_id: agentId,
            language,
            context: JSON.stringify(context),
            message_count: 2,
            active_turn_id: messageId,
            active_turn_expires_at: leaseUntil(leaseMs),
            last_message_at: new Date(),
          })
          .execute();
        await options.onConversationCreated?.(trx, conversationId);
      }
      await trx
        .insertInto('messages')
        .values([
          {
            id: inputId,
            tenant_id: tenantId,
            conversation_id: conversationId,
            agent_id: null,
            role: hidden ? 'system' : 'user',
            author: hidden ? 'application' : 'customer',
            hidden,
            content: input.content,
            status: 'COMPLETED',
            citations: '[]',
            handoff: 'null',
            error: 'null',
            in_reply_to: null,
          },
          {
            id: messageId,
            tenant_id: tenantId,
            conversation_id: conversationId,
            agent_id: agentId,
            // The reply to an application event is a system message (spec: SDK Send Message).
            role: hidden ? 'system' : 'assistant',
            author: 'agent',
            hidden: false,
            content: '',
            status: 'IN_PROGRESS',
            citations: '[]',
            handoff: 'null',
            error: 'null',
            in_reply_to: inputId,
          },
        ])
        .execute();
      const state: TurnState = {
        input_message_id: inputId,
        history: await loadHistory(trx, tenantId, conversationId, inputId),
        items: [{ type: 'input', author: hidden ? 'application' : 'customer', content: input.content }],
        passages: [],
        texts: [],
        citations: [],
        handoff: null,
        steps: 0,
        language,
        tool_overrides: options.toolOverrides ?? null,
        inline_results: {},
      };
      await trx
        .insertInto('agent_turns')
        .values({
          message_id: messageId,
          tenant_id: tenantId,
          conversation_id: conversationId,
          mode,
          client_functions: JSON.stringify(clientFunctions),
          context: JSON.stringify(context),
          state: JSON.stringify(state),
        })
        .execute();
      return { conversationId, context, agentId, state };
    });
    agent = agent?.id === agentId ? agent : await agents.findAgent(tenantId, agentId);

    const settled = deferred<MessageRecord>();
    settled.promise.catch(() => undefined);
    const rt = runtimeFor(
      {
        tenantId,
        messageId,
        conversationId,
        agent: agent as AgentRow,
        mode,
        clientFunctions,
        context,
        state,
        trace: newTrace(input.content, state.language),
      },
      options,
      settled,
    );
    rt.emit('message.created', { role: hidden ? 'system' : 'assistant', in_reply_to: inputId });
    const finished = launch(rt, settled);
    return { messageId, conversationId, settled: settled.promise, finished };
  }

  /**
   * Records client function results for a turn waiting on them. The turn's message row is locked
   * while the results are checked and written: a continue claiming the turn, or a waiting turn
   * going on, changes that row, so a result is either written before the turn reads it or refused
   * (409) because the turn has used the one it had.
   */
  async function submitFunctionResults(
    tenantId: string,
    messageId: string,
    results: { call_id: string; output: unknown }[],
  ): Promise<FunctionResultsAck> {
    const { conversationId, seen, pending } = await db.transaction().execute(async (trx) => {
      const message = await trx
        .selectFrom('messages')
        .select(['status', 'conversation_id'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', messageId)
        .$if(!deps.playsSimulations, (query) => query.where(isCustomerConversation(tenantId, 'conversation_id')))
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
      const calls = await trx
        .selectFrom('function_calls')
        .select(['call_id', 'status'])
        .where('tenant_id', '=', tenantId)
        .where('message_id', '=', messageId)
        .where('type', '=', 'client')
        .execute();
      const known = new Set(calls.map((c) => c.call_id));
      // A paused turn has already used the results of its earlier steps: they are in its state.
      const used = new Set<string>();
      if (message.status === 'WAITING_CLIENT') {
        const turn = await trx
          .selectFrom('agent_turns')
          .select('state')
          .where('tenant_id', '=', tenantId)
          .where('message_id', '=', messageId)
          .executeTakeFirst();
        for (const item of (turn?.state as TurnState | undefined)?.items ?? []) {
          if (item.type === 'result') used.add(item.call_id);
        }
      }
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
        const usedAlready =
          message.status === 'IN_PROGRESS'
            ? calls.find((c) => c.call_id === result.call_id)?.status !== 'pending'
            : used.has(result.call_id);
        if (usedAlready) {
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
    });
    notify(messageId);
    return {
      object: 'function_results',
      message_id: messageId,
      conversation_id: conversationId,
      received_call_ids: [...seen],
      pending_call_ids: pending,
      ready: pending.length === 0,
    };
  }

  /** Resumes a paused turn once every call has its result, with the functions and context sent now. */
  function continueTurn(
    tenantId: string,
    messageId: string,
    input: ContinueInput,
    options: TurnOptions = {},
  ): Promise<RunningTurn> {
    return places.streamed(tenantId, Boolean(options.onEvent), () => resumeTurn(tenantId, messageId, input, options));
  }

  async function resumeTurn(
    tenantId: string,
    messageId: string,
    input: ContinueInput,
    options: TurnOptions,
  ): Promise<RunningTurn> {
    // A customer's message: a simulated turn never pauses (its case's overrides answer its calls).
    const message = await conversations.findMessage(tenantId, messageId);
    if (!message) throw new NotFoundError('message', messageId);
    const turn = await db
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
    const calls = await db
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
    checkClientFunctions(input.client_functions);
    const clientFunctions = input.client_functions ?? (turn.client_functions as ClientFunction[]);
    const context = input.context ?? turn.context;
    // The functions and context sent now are stored with the claim: a value the database refuses
    // (a NUL character) then leaves the turn paused, as if the continue had not been sent.
    await db.transaction().execute(async (trx) => {
      await claim(trx, tenantId, message.conversation_id, messageId);
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
      // As a message's `context` does, a continue's replaces the conversation's (docs/agent.md).
      if (input.context !== undefined) {
        await trx
          .updateTable('conversations')
          .set({ context: JSON.stringify(input.context) })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', message.conversation_id)
          .execute();
      }
    });

    const agent =
      (message.agent_id ? await agents.findAgent(tenantId, message.agent_id) : undefined) ??
      (await agents.defaultAgent(tenantId));
    const state = turn.state as TurnState;
    const stored = await loadTraceData(db, tenantId, messageId);
    const trace = stored ? createTurnTrace(provider, traceOptions, stored) : newTrace('', state.language);
    const settled = deferred<MessageRecord>();
    settled.promise.catch(() => undefined);
    const rt = runtimeFor(
      {
        tenantId,
        messageId,
        conversationId: message.conversation_id,
        agent,
        mode: 'pause',
        clientFunctions,
        context,
        state,
        trace,
      },
      options,
      settled,
    );
    const last = [...state.items].reverse().find((item) => item.type === 'assistant');
    if (last?.type === 'assistant') {
      const results = await resultItems(rt, last.calls);
      // The client's results, now used; a workflow's was streamed when the turn called it.
      const clientCalls = new Set(calls.filter((call) => call.type === 'client').map((call) => call.call_id));
      for (const item of results) {
        if (item.type === 'result' && clientCalls.has(item.call_id)) {
          trace.answered(item.call_id, 'completed', item.output);
          rt.emit('function_result', {
            call_id: item.call_id,
            name: item.name,
            status: 'completed',
            output: item.output,
          });
        }
      }
      state.items.push(...results);
    }
    const finished = launch(rt, settled);
    return { messageId, conversationId: message.conversation_id, settled: settled.promise, finished };
  }

  return {
    provider: provider.name,
    sendMessage,
    submitFunctionResults,
    continueTurn,
    retrieve,
    /** Runs one whole turn without HTTP (simulations, coverage) and returns the agent message. */
    async runTurn(tenantId: string, input: SendMessageInput, options: TurnOptions = {}): Promise<MessageRecord> {
      const turn = await sendMessage(tenantId, input, options);
      return turn.finished;
    },
    /** Stops waiting turns and provider calls; running turns end FAILED. */
    async close(): Promise<void> {
      shutdown.abort();
      await Promise.allSettled([...running]);
      places.close();
    },
  };
}

export type AgentEngine = ReturnType<typeof createAgentEngine>;

/** Maps a thrown value to a DomainError if it is one (handlers rethrow the rest). */
