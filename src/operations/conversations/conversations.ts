// Conversations (scope `conversations`): the SDK Send Message endpoint, client function results,
// continuing a paused turn, feedback, and reading conversations (DESIGN.md §7, §8).
// A turn answers as JSON (the agent message) or, with `Accept: text/event-stream`, as a stream
// of Server-Sent Events: `event: <type>` and `data: <JSON>` frames, each carrying `message_id`
// and `conversation_id`, the last one `done` with the turn's `status`.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { RunningTurn } from '../../domain/agent/engine.js';
import type { TurnEvent } from '../../domain/agent/types.js';
import { ConversationRecord } from '../../domain/conversations/conversation-records.js';
import { FeedbackRecord } from '../../domain/conversations/feedback.js';
import { MessageRecord } from '../../domain/conversations/messages.js';
import { checkBulkItems } from '../../domain/errors.js';
import { ListOf, ListQuery, StringEnum, Uuid } from '../../domain/shapes.js';
import { defineOperation, type OperationContext, STREAMED, withStatus } from '../registry.js';
import { MessageTrace } from './trace-schema.js';

const ClientFunctions = Type.Array(
  Type.Object(
    {
      name: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'Letters, digits, `_` and `-`; 1 to 64.' }),
      description: Type.Optional(Type.String({ maxLength: 2000 })),
      parameters: Type.Optional(
        Type.Object({}, { additionalProperties: true, description: 'A JSON Schema of an object.' }),
      ),
    },
    { additionalProperties: false },
  ),
  { maxItems: 64, description: 'Functions the application lends the agent for this turn.' },
);

const Context = Type.Object(
  {},
  { additionalProperties: true, description: 'What the application knows (page, user); the agent sees it.' },
);

const MessageParams = Type.Object({ message_id: Uuid });

/**
 * Answers a turn: as JSON (the message once the turn ends, or once it waits for client results
 * when not paused), or as events when the caller takes them. `begin` throws the request's errors
 * before anything is sent; once the stream is open, the turn's own failures arrive as its `done` event.
 */
async function answerTurn(
  ctx: OperationContext<unknown, unknown, unknown>,
  begin: (onEvent: ((event: TurnEvent) => void) | undefined) => Promise<RunningTurn>,
) {
  const sink = ctx.events;
  if (!sink) return (await begin(undefined)).settled;
  const turn = await begin((event) => sink.event(event.type, event.data));
  sink.open();
  // A client that goes away loses nothing: the turn runs on and its result is stored.
  const heartbeat = setInterval(() => sink.comment('keep-alive'), ctx.services.agent.sseHeartbeatMs);
  try {
    await turn.finished;
  } catch (error) {
    sink.logError('turn result not stored', { err: error instanceof Error ? error.message : String(error) });
    sink.event('error', {
      message_id: turn.messageId,
      conversation_id: turn.conversationId,
      message: 'The result of the turn could not be stored.',
    });
  } finally {
    clearInterval(heartbeat);
    sink.end();
  }
  return STREAMED;
}

/** The document's `text/event-stream` answer of a turn (docs/agent.md, Streaming, has the table). */
const TURN_EVENT_STREAM =
  'With `Accept: text/event-stream`, the turn as Server-Sent Events: frames `event: <type>` and `data: <JSON>`, ' +
  'every `data` carrying `message_id` and `conversation_id`. Events: `message.created` (`role`, `in_reply_to`), ' +
  '`message.delta` (`delta`), `citation`, `function_call`, `function_result`, `handoff`, and last `done` with ' +
  '`status` COMPLETED, WAITING_CLIENT or FAILED, `error` when FAILED and `message`, the full record; an `error` ' +
  'event if the result could not be stored. `: keep-alive` comments every SSE_HEARTBEAT_MS. Request errors are ' +
  'answered as JSON before the stream opens. Each event is described in docs/agent.md (section Streaming) of the ' +
  "service's repository.";

const SendBody = Type.Object(
  {
    conversation_id: Type.Optional(Uuid),
    agent_id: Type.Optional(Uuid),
    content: Type.String({ minLength: 1, maxLength: 20_000 }),
    hidden: Type.Optional(
      Type.Boolean({ description: 'An application-sent event: needs conversation_id; the reply has role system.' }),
    ),
    client_functions: Type.Optional(ClientFunctions),
    client_functions_mode: Type.Optional(
      StringEnum(
        ['wait', 'pause'],
        'wait (default): the turn waits for results on the open stream. pause: the turn stores its state and ends WAITING_CLIENT.',
      ),
    ),
    language: Type.Optional(
      Type.String({ pattern: '^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$', description: 'e.g. `en`, `fr`, `pt-BR`.' }),
    ),
    context: Type.Optional(Context),
  },
  { additionalProperties: false },
);

const ContinueBody = Type.Object(
  { client_functions: Type.Optional(ClientFunctions), context: Type.Optional(Context) },
  { additionalProperties: false },
);

const FunctionResultsBody = Type.Object(
  {
    results: Type.Array(
      Type.Object(
        { call_id: Type.String({ minLength: 1, maxLength: 100 }), output: Type.Unknown() },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

const FunctionResultsAck = Type.Object(
  {
    object: Type.Literal('function_results'),
    message_id: Uuid,
    conversation_id: Uuid,
    received_call_ids: Type.Array(Type.String()),
    pending_call_ids: Type.Array(Type.String()),
    ready: Type.Boolean({ description: 'Every call of the turn has its result.' }),
  },
  { title: 'FunctionResults' },
);

type Body<T extends TSchema> = Static<T>;

export const conversationOperations = [
  defineOperation({
    id: 'sendMessage',
    tracesSteps: true,
    method: 'POST',
    path: '/api/v1/messages',
    scope: 'conversations:write',
    tag: 'Conversations',
    summary: 'Send a message (SDK Send Message)',
    description:
      'Sends a customer message and runs the agent’s turn. Without `conversation_id` it starts a conversation ' +
      '(with `agent_id` or the default agent); with one it continues it, abandoning a paused turn. ' +
      '`hidden: true` sends an application event to an existing conversation; the agent replies at once with a ' +
      '`system` message. `client_functions` lend the agent functions the application runs; with ' +
      '`client_functions_mode: "pause"` a turn that calls them ends `WAITING_CLIENT` and resumes with ' +
      '`POST /messages/{id}/continue`. Returns the agent message; with `Accept: text/event-stream` the turn ' +
      'streams as Server-Sent Events (`message.created`, `message.delta`, `function_call`, `function_result`, ' +
      '`citation`, `handoff`, and last `done` with `status` COMPLETED, WAITING_CLIENT or FAILED). ' +
      'A message sent while the agent is still answering in the same conversation is refused with 409. ' +
      "A streamed turn over the workspace's streamed turns on one server (TURN_MAX_STREAMS_PER_TENANT), or a turn " +
      'lending client functions in the default mode over its turns waiting for results (TURN_MAX_WAITING_PER_TENANT), ' +
      'is refused with 429 `turn_limit_exceeded` and `Retry-After`.',
    body: SendBody,
    response: MessageRecord,
    eventStream: TURN_EVENT_STREAM,
    // An unknown `conversation_id` answers 404 rather than 422 (docs/limitations.md, departures).
    errors: ['missing_required_parameter', 'invalid_parameters', 'not_found', 'conflict', 'turn_limit_exceeded'],
    handler: (ctx) =>
      answerTurn(ctx as OperationContext<unknown, unknown, unknown>, (onEvent) =>
        ctx.services.agent.sendMessage(ctx.tenantId, ctx.body as Body<typeof SendBody>, { onEvent }),
      ) as never,
  }),
  defineOperation({
    id: 'getMessage',
    method: 'GET',
    path: '/api/v1/messages/:message_id',
    scope: 'conversations:read',
    tag: 'Conversations',
    summary: 'Get a message',
    description: 'Returns one message; for an agent message, the state of its turn, its function calls and citations.',
    params: MessageParams,
    response: MessageRecord,
    handler: ({ tenantId, params, services }) => services.conversations.getMessage(tenantId, params.message_id),
  }),
  defineOperation({
    id: 'getMessageTrace',
    method: 'GET',
    path: '/api/v1/messages/:message_id/trace',
    scope: 'conversations:read',
    tag: 'Conversations',
    summary: "Get the trace of an agent message's turn",
    description:
      'Returns how the agent reached this message: the question as searched and every candidate passage with its ' +
      'rank (used, cited), each provider call (model, latency, input and output tokens, cost when MODEL_PRICES ' +
      'prices the model; the prompt only when TRACE_PROMPTS is true), each client function and workflow call with ' +
      'its duration and outcome, the decision taken and the latency. A turn that waits for its client has a ' +
      'partial trace (its `status` says so). 404 for a message that is not the agent’s, and for a turn still ' +
      'running that has stored nothing yet.',
    params: MessageParams,
    response: MessageTrace,
    handler: ({ tenantId, params, services }) => services.traces.getTrace(tenantId, params.message_id),
  }),
  defineOperation({
    id: 'submitFunctionResults',
    tracesSteps: true,
    method: 'POST',
    path: '/api/v1/messages/:message_id/function-results',
    scope: 'conversations:write',
    tag: 'Conversations',
    summary: 'Send client function results',
    description:
      'Gives the results of client function calls of a turn waiting for them (status WAITING_CLIENT), by ' +
      '`call_id`. A result may be sent again to replace it until the turn resumes. A paused turn then ' +
      'resumes with `POST /messages/{id}/continue`; a turn in the default mode resumes by itself once every ' +
      'call has its result. Returns which calls still lack a result.',
    params: MessageParams,
    body: FunctionResultsBody,
    response: FunctionResultsAck,
    errors: ['missing_required_parameter', 'invalid_parameters', 'empty_items', 'too_many_items', 'conflict'],
    handler: async ({ tenantId, params, body, services }) => {
      checkBulkItems('results', body.results);
      return services.agent.submitFunctionResults(tenantId, params.message_id, body.results);
    },
  }),
  defineOperation({
    id: 'continueMessage',
    tracesSteps: true,
    method: 'POST',
    path: '/api/v1/messages/:message_id/continue',
    scope: 'conversations:write',
    tag: 'Conversations',
    summary: 'Continue a paused turn',
    description:
      'Resumes a paused agent turn once every function call of it has a result (otherwise 409 `conflict`), ' +
      'with those results and the `client_functions` and `context` sent now (when absent, the ones the turn ' +
      'was paused with). A turn abandoned by a newer message, or not paused, answers 409. Answers like ' +
      '`POST /messages`: the agent message, or an SSE stream with `Accept: text/event-stream` (429 ' +
      "`turn_limit_exceeded` over the workspace's streamed turns, as there).",
    params: MessageParams,
    body: ContinueBody,
    response: MessageRecord,
    eventStream: TURN_EVENT_STREAM,
    errors: ['conflict', 'turn_limit_exceeded'],
    handler: (ctx) =>
      answerTurn(ctx as OperationContext<unknown, unknown, unknown>, (onEvent) =>
        ctx.services.agent.continueTurn(ctx.tenantId, ctx.params.message_id, ctx.body ?? {}, { onEvent }),
      ) as never,
  }),
  defineOperation({
    id: 'createMessageFeedback',
    method: 'POST',
    path: '/api/v1/messages/:message_id/feedback',
    scope: 'conversations:write',
    tag: 'Conversations',
    summary: 'Rate an agent message',
    description:
      'Records feedback on a message the agent wrote: `rating` positive or negative and an optional comment. ' +
      'Each call records one feedback. Feedback on a customer or application message answers 409.',
    params: MessageParams,
    body: Type.Object(
      {
        rating: StringEnum(['positive', 'negative']),
        comment: Type.Optional(Type.String({ maxLength: 5000 })),
      },
      { additionalProperties: false },
    ),
    response: FeedbackRecord,
    status: 201,
    errors: ['missing_required_parameter', 'conflict'],
    handler: async ({ tenantId, params, body, services }) =>
      withStatus(201, await services.conversations.createFeedback(tenantId, params.message_id, body)),
  }),
  defineOperation({
    id: 'listConversations',
    method: 'GET',
    path: '/api/v1/conversations',
    scope: 'conversations:read',
    tag: 'Conversations',
    summary: 'List conversations',
    description:
      'Lists conversations, newest first; `agent_id` filters by the agent now in charge. The conversation of a ' +
      'simulation test case being played is not listed (nor found by the other conversation routes).',
    query: Type.Object({ ...ListQuery.properties, agent_id: Type.Optional(Uuid) }, { additionalProperties: false }),
    response: ListOf(ConversationRecord),
    handler: ({ tenantId, query, services }) => services.conversations.listConversations(tenantId, query),
  }),
  defineOperation({
    id: 'getConversation',
    method: 'GET',
    path: '/api/v1/conversations/:conversation_id',
    scope: 'conversations:read',
    tag: 'Conversations',
    summary: 'Get a conversation',
    description: 'Returns one conversation: its agent, language, context and message count.',
    params: Type.Object({ conversation_id: Uuid }),
    response: ConversationRecord,
    handler: ({ tenantId, params, services }) =>
      services.conversations.getConversation(tenantId, params.conversation_id),
  }),
  defineOperation({
    id: 'listConversationMessages',
    method: 'GET',
    path: '/api/v1/conversations/:conversation_id/messages',
    scope: 'conversations:read',
    tag: 'Conversations',
    summary: 'List the messages of a conversation',
    description:
      'Lists the messages of a conversation oldest first (the order a transcript reads in), hidden ones ' +
      'included (`hidden: true`), each agent message with its turn status, function calls and citations.',
    params: Type.Object({ conversation_id: Uuid }),
    query: ListQuery,
    response: ListOf(MessageRecord),
    handler: ({ tenantId, params, query, services }) =>
      services.conversations.listMessages(tenantId, params.conversation_id, query),
  }),
];
