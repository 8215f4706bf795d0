// A message starts a turn: the request is checked, the conversation started or claimed, the
// message and the agent's reply (IN_PROGRESS) written with the turn's state in one transaction,
// and the turn launched. Every request error is thrown before anything runs.
import { sql, type Transaction } from 'kysely';
import type { Database } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import type { AgentRow } from '../conversations/agents.js';
import { DomainError, InvalidParametersError, MissingParameterError } from '../errors.js';
import { claim, leaseUntil } from './conversation-lease.js';
import type { ClientFunctionsMode, RunningTurn, SendMessageInput, TurnOptions } from './engine-types.js';
import { launch } from './turn-loop.js';
import { type EngineContext, newTrace, runtimeFor, settlement, type TurnState } from './turn-runtime.js';
import { loadHistory } from './turn-store.js';
import { checkClientFunctions } from './turn-tools.js';
import type { ClientFunction } from './types.js';

/** A turn about to be written: the request and the ids of its two messages. */
interface NewTurn {
  tenantId: string;
  input: SendMessageInput;
  options: TurnOptions;
  /** The agent the request named, or the default one when it starts a conversation. */
  agent: AgentRow | undefined;
  inputId: string;
  messageId: string;
  mode: ClientFunctionsMode;
  clientFunctions: ClientFunction[];
}

/** The conversation a turn runs in, as the turn starts. */
interface TurnConversation {
  conversationId: string;
  language: string | null;
  context: Record<string, unknown> | null;
  agentId: string;
}

/**
 * Sends a message: starts or continues a conversation and starts the agent's turn. Throws
 * the request's errors before anything runs; the turn itself never throws (it ends FAILED).
 */
export async function sendMessage(
  ctx: EngineContext,
  tenantId: string,
  input: SendMessageInput,
  options: TurnOptions = {},
): Promise<RunningTurn> {
  // A turn that may wait for client results is refused while its tenant's waiting places are taken.
  const full =
    (input.client_functions_mode ?? 'wait') === 'wait' &&
    input.client_functions?.length &&
    ctx.places.waitingFull(tenantId);
  if (full) throw new DomainError('turn_limit_exceeded', full);
  return ctx.places.streamed(tenantId, Boolean(options.onEvent), () => startMessage(ctx, tenantId, input, options));
}

async function startMessage(
  ctx: EngineContext,
  tenantId: string,
  input: SendMessageInput,
  options: TurnOptions,
): Promise<RunningTurn> {
  let agent = await requestedAgent(ctx, tenantId, input);
  const turn: NewTurn = {
    tenantId,
    input,
    options,
    agent,
    inputId: newId(),
    messageId: newId(),
    mode: input.client_functions_mode ?? 'wait',
    clientFunctions: input.client_functions ?? [],
  };
  const { messageId, inputId } = turn;
  const { conversationId, context, agentId, state } = await ctx.db
    .transaction()
    .execute((trx) => writeNewTurn(ctx, trx, turn));
  agent = agent?.id === agentId ? agent : await ctx.agents.findAgent(tenantId, agentId);

  const settled = settlement();
  const rt = runtimeFor(
    ctx,
    {
      tenantId,
      messageId,
      conversationId,
      agent: agent as AgentRow,
      mode: turn.mode,
      clientFunctions: turn.clientFunctions,
      context,
      state,
      trace: newTrace(ctx, input.content, state.language),
    },
    options,
    settled,
  );
  rt.emit('message.created', { role: input.hidden === true ? 'system' : 'assistant', in_reply_to: inputId });
  const finished = launch(ctx, rt, settled);
  return { messageId, conversationId, settled: settled.promise, finished };
}

/** Checks the request; the agent it names, or the default agent when it starts a conversation. */
async function requestedAgent(
  ctx: EngineContext,
  tenantId: string,
  input: SendMessageInput,
): Promise<AgentRow | undefined> {
  if (input.hidden && input.conversation_id === undefined) {
    throw new MissingParameterError(
      'conversation_id',
      'A hidden message needs the conversation_id of an existing conversation; it cannot start one.',
    );
  }
  checkClientFunctions(input.client_functions);
  let agent: AgentRow | undefined;
  if (input.agent_id !== undefined) {
    agent = await ctx.agents.findAgent(tenantId, input.agent_id);
    if (!agent) throw new InvalidParametersError('agent_id', `No agent '${input.agent_id}' in this workspace.`);
  }
  if (input.conversation_id === undefined) agent ??= await ctx.agents.defaultAgent(tenantId);
  return agent;
}

/** Writes the turn in `trx`: its conversation claimed or created, its two messages, its state. */
async function writeNewTurn(ctx: EngineContext, trx: Transaction<Database>, turn: NewTurn) {
  const { tenantId, input, inputId, messageId } = turn;
  const { conversationId, language, context, agentId } =
    input.conversation_id !== undefined
      ? await claimConversation(ctx, trx, turn, input.conversation_id)
      : await createConversation(ctx, trx, turn);
  await insertMessages(trx, turn, conversationId, agentId);
  const hidden = input.hidden === true;
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
    tool_overrides: turn.options.toolOverrides ?? null,
    inline_results: {},
  };
  await trx
    .insertInto('agent_turns')
    .values({
      message_id: messageId,
      tenant_id: tenantId,
      conversation_id: conversationId,
      mode: turn.mode,
      client_functions: JSON.stringify(turn.clientFunctions),
      context: JSON.stringify(context),
      state: JSON.stringify(state),
    })
    .execute();
  return { conversationId, context, agentId, state };
}

/** Claims an existing conversation for the turn, abandoning its paused turn, with the message's settings. */
async function claimConversation(
  ctx: EngineContext,
  trx: Transaction<Database>,
  turn: NewTurn,
  id: string,
): Promise<TurnConversation> {
  const { tenantId, input } = turn;
  const row = await claim(ctx, trx, tenantId, id, turn.messageId);
  const conversationId = row.id;
  const language = input.language ?? row.language;
  const context = input.context ?? row.context;
  const agentId = turn.agent?.id ?? row.agent_id;
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
  return { conversationId, language, context, agentId };
}

/** Starts a conversation already claimed by the turn. */
async function createConversation(
  ctx: EngineContext,
  trx: Transaction<Database>,
  turn: NewTurn,
): Promise<TurnConversation> {
  const { tenantId, input } = turn;
  const conversationId = newId();
  const language = input.language ?? null;
  const context = input.context ?? null;
  const agentId = (turn.agent as AgentRow).id;
  await trx
    .insertInto('conversations')
    .values({
      id: conversationId,
      tenant_id: tenantId,
      agent_id: agentId,
      language,
      context: JSON.stringify(context),
      message_count: 2,
      active_turn_id: turn.messageId,
      active_turn_expires_at: leaseUntil(ctx.leaseMs),
      last_message_at: new Date(),
    })
    .execute();
  await turn.options.onConversationCreated?.(trx, conversationId);
  return { conversationId, language, context, agentId };
}

/** The message sent and the agent's reply to it, in progress. */
async function insertMessages(trx: Transaction<Database>, turn: NewTurn, conversationId: string, agentId: string) {
  const { tenantId, input } = turn;
  const hidden = input.hidden === true;
  await trx
    .insertInto('messages')
    .values([
      {
        id: turn.inputId,
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
        id: turn.messageId,
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
        in_reply_to: turn.inputId,
      },
    ])
    .execute();
}
