// The vocabulary of the turn engine (DESIGN.md §8), shared by the engine and its providers.
// A provider sees a provider-neutral transcript and answers one step at a time; the engine runs
// the tools, stores the turn and streams its events. No HTTP and no SQL here.

/** A function the client application lends the agent for this turn (runs in the browser). */
export interface ClientFunction {
  name: string;
  description?: string | undefined;
  /** A JSON Schema for the arguments. */
  parameters?: Record<string, unknown> | undefined;
}

/** A tool offered to the provider in one step. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /** client: the application runs it; workflow: an enabled workflow, run server-side; internal: the engine's own. */
  type: 'client' | 'workflow' | 'internal';
}

export interface ToolCall {
  call_id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/** A passage of the tenant's documents found by knowledge search. */
export interface Passage {
  document_id: string;
  title: string;
  snippet: string;
  /** The passage's text: a section of its document, a few paragraphs at most. */
  content: string;
  /** Its headings in the document, outermost first, joined by ` > ` (absent or '' before the first). */
  heading?: string;
  language: string;
  source_id: string | null;
  /** For a page read from a website: its URL; null for other documents. */
  url: string | null;
  rank: number;
}

export interface Citation {
  document_id: string;
  title: string;
  source_id: string | null;
  /** The link to the document: a website page's URL; null for other documents. */
  url: string | null;
  language: string;
  snippet: string;
}

/** The citation of a passage an answer rests on. */
export const citationOf = (passage: Passage): Citation => ({
  document_id: passage.document_id,
  title: passage.title,
  source_id: passage.source_id,
  url: passage.url,
  language: passage.language,
  snippet: passage.snippet,
});

/** A message of the conversation before this turn. */
export interface HistoryMessage {
  author: 'customer' | 'application' | 'agent';
  content: string;
}

/** What happened so far in this turn, in order. */
export type TurnItem =
  | { type: 'input'; author: 'customer' | 'application'; content: string }
  | { type: 'assistant'; text: string; calls: ToolCall[] }
  | { type: 'result'; call_id: string; name: string; output: unknown };

export interface HandoffTarget {
  id: string;
  name: string;
}

export interface StepRequest {
  /** The agent's instructions. */
  instructions: string | null;
  agentName: string;
  history: HistoryMessage[];
  items: TurnItem[];
  tools: ToolSpec[];
  /** Passages found for the turn's input, best first, already at or above the rank threshold. */
  passages: Passage[];
  handoffAgents: HandoffTarget[];
  context: Record<string, unknown> | null;
  language: string | null;
  /** Streams text as it is produced. */
  onDelta: (text: string) => void;
  signal: AbortSignal;
}

export interface StepResult {
  /** The step's text (already streamed through onDelta). */
  text: string;
  /** Tools to call before the next step; none ends the turn. */
  calls: ToolCall[];
  citations: Citation[];
  /** The built-in provider hands the conversation to one of the handoff agents. */
  handoffTo?: HandoffTarget | undefined;
  /** The built-in provider could not answer: the question becomes a knowledge gap. */
  knowledgeGap?: boolean | undefined;
  /** Tokens of the call, from the provider's `usage` (`reported: false` when it sent none). */
  usage?: { input_tokens: number | null; output_tokens: number | null; reported: boolean } | undefined;
  /** The model that answered, when the provider names it. */
  model?: string | undefined;
  /** What was sent to the model (the chat messages), for the turn's trace when prompts may be stored. */
  prompt?: unknown;
}

export interface Provider {
  readonly name: 'builtin' | 'openai';
  /** The model asked (LLM_MODEL); the built-in provider is its own model, `builtin`. */
  readonly model?: string | undefined;
  step(request: StepRequest): Promise<StepResult>;
}

/** A provider failure the customer may read: it ends the turn FAILED with this reason. */
export class ProviderError extends Error {
  constructor(
    readonly code: 'provider_error' | 'provider_timeout' | 'provider_unreachable',
    message: string,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

export type TurnStatus = 'IN_PROGRESS' | 'COMPLETED' | 'WAITING_CLIENT' | 'FAILED' | 'ABANDONED';

/** A stream event: its type (the SSE `event:` name) and its data, which always carries message_id and conversation_id (DESIGN.md §8). */
export interface TurnEvent {
  type: 'message.created' | 'message.delta' | 'function_call' | 'function_result' | 'citation' | 'handoff' | 'done';
  data: { message_id: string; conversation_id: string; [field: string]: unknown };
}
