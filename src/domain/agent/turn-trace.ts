// The trace of an agent turn (docs/agent.md, "The trace of a turn"): a small recorder the engine
// hands its steps to, and that writes them, with the turn's state, in `message_traces`. It records
// the question as searched and the candidate passages with their ranks, each provider call (its
// model, latency, tokens from the provider's `usage`, and cost when MODEL_PRICES prices the
// model), each function call with its duration and outcome, the decision taken and the latency.
// It also reports the turn to the metrics and wraps the search and provider calls in spans.
//
// Never stored: the provider's key or any other secret the engine names (each is replaced by
// `[redacted]` wherever it appears), and, unless TRACE_PROMPTS allows it, the prompt sent to the
// provider. A paused turn's trace is read back when it resumes and goes on from there.
import { recordKnowledgeSearch, recordTurn } from '../../observability/metrics.js';
import { withSpan } from '../../observability/tracing.js';
import { costOf, type ModelPrices } from './model-prices.js';
import type { Citation, Passage, Provider, StepResult, ToolCall } from './types.js';

export interface TraceOptions {
  /** MODEL_PRICES. */
  prices: ModelPrices;
  /** TRACE_PROMPTS: store what was sent to the provider. */
  storePrompts: boolean;
  /** Values that must never appear in a trace (the provider's API key). */
  secrets: string[];
}

export interface TraceCandidate {
  document_id: string;
  title: string;
  source_id: string | null;
  language: string;
  rank: number;
  /** At or above the threshold: given to the provider to answer from. */
  used: boolean;
  /** Cited by the answer. */
  cited: boolean;
}

export interface TraceProviderCall {
  step: number;
  provider: string;
  model: string;
  started_at: string;
  duration_ms: number;
  status: 'completed' | 'failed';
  error: { code: string; message: string } | null;
  /** Null when the provider reported no usage. The built-in provider runs no model: 0. */
  input_tokens: number | null;
  output_tokens: number | null;
  usage_reported: boolean;
  cost: number | null;
  text_chars: number;
  tool_calls: string[];
  /** What was sent to the provider, only when TRACE_PROMPTS allows it. */
  prompt: unknown;
}

export interface TraceFunctionCall {
  call_id: string;
  name: string;
  type: 'client' | 'workflow' | 'internal';
  status: 'pending' | 'completed' | 'failed';
  overridden: boolean;
  called_at: string;
  /** From the call to its result (for a paused client call: until the turn resumed with it). */
  duration_ms: number | null;
  error: string | null;
}

export type TraceDecisionType = 'answer' | 'decline' | 'handoff' | 'waiting_client' | 'in_progress' | 'failed';

export interface TraceData {
  provider: string;
  model: string;
  prompts_stored: boolean;
  started_at: string;
  ended_at: string | null;
  /** Time the engine spent on the turn; a paused turn's wait for its client is not counted. */
  latency_ms: number;
  question: string;
  language: string | null;
  search: {
    question: string;
    language: string | null;
    threshold: number;
    duration_ms: number;
    error: { code: string; message: string } | null;
    candidates: TraceCandidate[];
  } | null;
  provider_calls: TraceProviderCall[];
  function_calls: TraceFunctionCall[];
  decision: {
    type: TraceDecisionType;
    knowledge_gap_recorded: boolean;
    handoff: { agent_id: string; agent_name: string; ticket_id: string } | null;
    error: { code: string; message: string } | null;
    cited_document_ids: string[];
  };
}

const REDACTED = '[redacted]';
const since = (start: number) => Math.max(0, Math.round(performance.now() - start));
const failureOf = (error: unknown) => ({
  code: typeof (error as { code?: unknown }).code === 'string' ? String((error as { code: string }).code) : 'error',
  message: error instanceof Error ? error.message : String(error),
});

export function newTraceData(provider: Provider, question: string, language: string | null, storePrompts: boolean) {
  return {
    provider: provider.name,
    model: provider.model ?? provider.name,
    prompts_stored: storePrompts,
    started_at: new Date().toISOString(),
    ended_at: null,
    latency_ms: 0,
    question,
    language,
    search: null,
    provider_calls: [],
    function_calls: [],
    decision: { type: 'answer', knowledge_gap_recorded: false, handoff: null, error: null, cited_document_ids: [] },
  } satisfies TraceData as TraceData;
}

/** Collects one run of a turn (a resumed turn is a new run that goes on with the stored data). */
export function createTurnTrace(provider: Provider, options: TraceOptions, data: TraceData) {
  const runStarted = performance.now();
  const latencyBefore = data.latency_ms;
  const secrets = options.secrets.filter((secret) => secret.length >= 4);

  /** The trace as stored: NUL characters (refused by jsonb) dropped and secrets redacted. */
  function serialize(): string {
    return JSON.stringify(data, (_key, value: unknown) => {
      if (typeof value !== 'string') return value;
      let text = value.includes('\u0000') ? value.replaceAll('\u0000', '') : value;
      for (const secret of secrets) if (text.includes(secret)) text = text.replaceAll(secret, REDACTED);
      return text;
    });
  }

  return {
    data,

    /** Runs the knowledge search, recording the question, every candidate and its rank. */
    search: (question: string, language: string | null, threshold: number, run: () => Promise<Passage[]>) =>
      traceSearch(data, { question, language, threshold }, run),

    /** Runs one provider step, recording its model, latency, usage, cost and outcome. */
    providerCall: (step: number, call: () => Promise<StepResult>) =>
      traceProviderCall(data, provider, options, step, call),

    /** The calls of a step, as the engine offered their tools. */
    called(calls: ToolCall[], typeOf: (name: string) => TraceFunctionCall['type'] | undefined) {
      const at = new Date().toISOString();
      for (const call of calls) {
        data.function_calls.push({
          call_id: call.call_id,
          name: call.name,
          type: typeOf(call.name) ?? 'internal',
          status: 'pending',
          overridden: false,
          called_at: at,
          duration_ms: null,
          error: null,
        });
      }
    },

    /** A call's result is in (a workflow run, an override, a client's result the turn now uses). */
    answered(callId: string, status: 'completed' | 'failed', output: unknown, overridden = false) {
      const call = data.function_calls.find((c) => c.call_id === callId);
      if (call?.status !== 'pending') return;
      call.status = status;
      call.overridden = overridden;
      call.duration_ms = Math.max(0, Date.now() - Date.parse(call.called_at));
      const error = (output as { error?: unknown } | null)?.error;
      if (status === 'failed' || typeof error === 'string') call.error = typeof error === 'string' ? error : null;
    },

    knowledgeGap(recorded: boolean) {
      data.decision.knowledge_gap_recorded ||= recorded;
      data.decision.type = 'decline';
    },

    /** Fills in the decision and latency for the state the turn is written in. */
    settle(
      status: string,
      error: { code: string; message: string } | null,
      state: { citations: Citation[]; handoff: TraceData['decision']['handoff'] } | null,
    ) {
      const decision = data.decision;
      decision.error = error;
      if (state) {
        decision.cited_document_ids = state.citations.map((c) => c.document_id);
        const cited = new Set(decision.cited_document_ids);
        for (const candidate of data.search?.candidates ?? []) candidate.cited = cited.has(candidate.document_id);
        decision.handoff = state.handoff;
      }
      if (status === 'FAILED') decision.type = 'failed';
      else if (status === 'WAITING_CLIENT') decision.type = 'waiting_client';
      else if (decision.handoff) decision.type = 'handoff';
      else if (decision.type !== 'decline') decision.type = status === 'IN_PROGRESS' ? 'in_progress' : 'answer';
      data.latency_ms = latencyBefore + since(runStarted);
      data.ended_at = status === 'COMPLETED' || status === 'FAILED' ? new Date().toISOString() : null;
    },

    /** The totals stored beside the trace (summed by the dashboard report). */
    totals() {
      let input = 0;
      let output = 0;
      let cost: number | null = null;
      for (const call of data.provider_calls) {
        input += call.input_tokens ?? 0;
        output += call.output_tokens ?? 0;
        if (call.cost !== null) cost = (cost ?? 0) + call.cost;
      }
      return {
        input_tokens: input,
        output_tokens: output,
        cost: cost === null ? null : Math.round(cost * 1e10) / 1e10,
      };
    },

    serialize,

    /** Reports the end of this run of the turn to the metrics. */
    report(status: string) {
      recordTurn(provider.name, status, since(runStarted) / 1000);
    },
  };
}

export type TurnTrace = ReturnType<typeof createTurnTrace>;

/** The knowledge search of a run, recorded: the question, every candidate and its rank. */
async function traceSearch(
  data: TraceData,
  { question, language, threshold }: { question: string; language: string | null; threshold: number },
  run: () => Promise<Passage[]>,
): Promise<Passage[]> {
  const start = performance.now();
  const search: NonNullable<TraceData['search']> = {
    question,
    language,
    threshold,
    duration_ms: 0,
    error: null,
    candidates: [],
  };
  data.search = search;
  try {
    const found = await withSpan('knowledge.search', { 'search.language': language ?? '' }, run);
    search.candidates = found.map((p) => ({
      document_id: p.document_id,
      title: p.title,
      source_id: p.source_id,
      language: p.language,
      rank: p.rank,
      used: p.rank >= threshold,
      cited: false,
    }));
    return found;
  } catch (error) {
    search.error = failureOf(error);
    throw error;
  } finally {
    search.duration_ms = since(start);
    recordKnowledgeSearch(search.duration_ms / 1000);
  }
}

/** One provider step, recorded: its model, latency, usage, cost and outcome. */
async function traceProviderCall(
  data: TraceData,
  provider: Provider,
  options: TraceOptions,
  step: number,
  call: () => Promise<StepResult>,
): Promise<StepResult> {
  const model = provider.model ?? provider.name;
  const record: TraceProviderCall = {
    step,
    provider: provider.name,
    model,
    started_at: new Date().toISOString(),
    duration_ms: 0,
    status: 'completed',
    error: null,
    input_tokens: null,
    output_tokens: null,
    usage_reported: false,
    cost: null,
    text_chars: 0,
    tool_calls: [],
    prompt: null,
  };
  data.provider_calls.push(record);
  const start = performance.now();
  try {
    const result = await withSpan('agent.provider_call', { 'llm.provider': provider.name, 'llm.model': model }, call);
    record.model = result.model ?? model;
    if (result.usage) {
      record.input_tokens = result.usage.input_tokens;
      record.output_tokens = result.usage.output_tokens;
      record.usage_reported = result.usage.reported;
    }
    record.cost = costOf(options.prices, record.model, record.input_tokens, record.output_tokens);
    record.text_chars = result.text.length;
    record.tool_calls = result.calls.map((c) => c.name);
    if (options.storePrompts && result.prompt !== undefined) record.prompt = result.prompt;
    return result;
  } catch (error) {
    record.status = 'failed';
    record.error = failureOf(error);
    throw error;
  } finally {
    record.duration_ms = since(start);
  }
}
