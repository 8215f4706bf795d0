// The trace of an agent turn as the API answers it (GET /messages/{id}/trace, and copied into a
// simulation result's outcome). Fields: docs/agent.md, "The trace of a turn".
import { Type } from '@sinclair/typebox';
import { Nullable, Timestamp, Uuid } from '../../domain/shapes.js';

const Failure = Nullable(Type.Object({ code: Type.String(), message: Type.String() }));
const Tokens = (description: string) => Nullable(Type.Integer({ minimum: 0, description }));
const Cost = Nullable(
  Type.Number({ description: 'Tokens priced by MODEL_PRICES for the model; null when the model has no price.' }),
);

const Candidate = Type.Object({
  document_id: Type.String(),
  title: Type.String(),
  source_id: Nullable(Type.String()),
  language: Type.String(),
  rank: Type.Number({ description: 'The knowledge search rank, in (0, 1).' }),
  used: Type.Boolean({ description: 'At or above the threshold: given to the provider to answer from.' }),
  cited: Type.Boolean({ description: 'Cited by the answer.' }),
});

const ProviderCall = Type.Object({
  step: Type.Integer({ description: 'The step of the turn, from 1.' }),
  provider: Type.String({ description: '`builtin` or `openai`.' }),
  model: Type.String({ description: 'LLM_MODEL; `builtin` for the built-in provider.' }),
  started_at: Timestamp,
  duration_ms: Type.Integer(),
  status: Type.Unsafe<'completed' | 'failed'>({ type: 'string', enum: ['completed', 'failed'] }),
  error: Failure,
  input_tokens: Tokens("Prompt tokens from the provider's `usage`; null when it reported none."),
  output_tokens: Tokens("Completion tokens from the provider's `usage`; null when it reported none."),
  usage_reported: Type.Boolean({
    description: 'The provider reported the usage. The built-in provider runs no model: 0 tokens, not reported.',
  }),
  cost: Cost,
  text_chars: Type.Integer({ description: 'Characters of text the step produced.' }),
  tool_calls: Type.Array(Type.String(), { description: 'The tools the step called, by name.' }),
  prompt: Type.Unknown({ description: 'The messages sent to the model when TRACE_PROMPTS is true; else null.' }),
});

const FunctionCall = Type.Object({
  call_id: Type.String(),
  name: Type.String(),
  type: Type.Unsafe<'client' | 'workflow' | 'internal'>({ type: 'string', enum: ['client', 'workflow', 'internal'] }),
  status: Type.Unsafe<'pending' | 'completed' | 'failed'>({
    type: 'string',
    enum: ['pending', 'completed', 'failed'],
  }),
  overridden: Type.Boolean({ description: "Answered by a simulation case's override." }),
  called_at: Timestamp,
  duration_ms: Nullable(
    Type.Integer({ description: 'From the call to its result (a paused call: to the continue); null while pending.' }),
  ),
  error: Nullable(Type.String()),
});

const DECISIONS = ['answer', 'decline', 'handoff', 'waiting_client', 'in_progress', 'failed'] as const;

export const MessageTrace = Type.Object(
  {
    object: Type.Literal('message_trace'),
    message_id: Uuid,
    conversation_id: Uuid,
    agent_id: Nullable(Uuid),
    status: Type.String({ description: "The message's status: the trace is final once COMPLETED or FAILED." }),
    provider: Type.String(),
    model: Type.String(),
    prompts_stored: Type.Boolean({ description: 'TRACE_PROMPTS was true when the turn ran.' }),
    started_at: Timestamp,
    ended_at: Nullable(Timestamp),
    latency_ms: Type.Integer({ description: "The engine's time on the turn; a paused turn's wait is not counted." }),
    input_tokens: Type.Integer({ description: 'Input tokens of every provider call.' }),
    output_tokens: Type.Integer({ description: 'Output tokens of every provider call.' }),
    cost: Cost,
    question: Type.String({ description: 'The message the turn answered, as searched.' }),
    language: Nullable(Type.String()),
    search: Nullable(
      Type.Object({
        question: Type.String(),
        language: Nullable(Type.String()),
        threshold: Type.Number(),
        duration_ms: Type.Integer(),
        error: Failure,
        candidates: Type.Array(Candidate, { description: 'Every passage found, best first.' }),
      }),
    ),
    provider_calls: Type.Array(ProviderCall),
    function_calls: Type.Array(FunctionCall, { description: 'Client function and workflow calls.' }),
    decision: Type.Object({
      type: Type.Unsafe<(typeof DECISIONS)[number]>({
        type: 'string',
        enum: [...DECISIONS],
        description:
          'answer; decline (the built-in provider did not know); handoff; waiting_client (paused or waiting for ' +
          'client results); in_progress; failed.',
      }),
      knowledge_gap_recorded: Type.Boolean(),
      handoff: Nullable(Type.Object({ agent_id: Uuid, agent_name: Type.String(), ticket_id: Uuid })),
      error: Failure,
      cited_document_ids: Type.Array(Type.String()),
    }),
    updated_at: Timestamp,
  },
  { title: 'MessageTrace' },
);
