// The `openai` provider (DESIGN.md §8): any OpenAI-compatible chat-completions server with tool
// calling and streaming (OpenAI, Azure, vLLM, Ollama, LM Studio). One step is one streamed
// `POST {LLM_BASE_URL}/chat/completions`; text deltas are forwarded as they arrive and tool calls
// are gathered from their fragments. Every failure becomes a ProviderError with a reason a
// person can read, which ends the turn FAILED. Tool names are rewritten to the ones the API accepts
// (a workflow may be called `Refund order`) and the model's calls mapped back.
import { newCallId } from './builtin-provider.js';
import {
  type Citation,
  citationOf,
  type Provider,
  ProviderError,
  type StepRequest,
  type StepResult,
  type ToolCall,
  type TurnItem,
} from './types.js';

export interface OpenAiProviderOptions {
  /** The API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  baseUrl: string;
  apiKey?: string | undefined;
  model: string;
  timeoutMs: number;
}

interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

interface ChunkToolCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** Token counts as OpenAI reports them (`usage` of a completion, or of a stream's last chunk). */
interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
}

const tokens = (value: unknown): number | null =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.round(value) : null;

interface Choice {
  delta?: { content?: string | null; tool_calls?: ChunkToolCall[] };
  message?: { content?: string | null; tool_calls?: ChunkToolCall[] };
  finish_reason?: string | null;
}

const APPLICATION_PREFIX = '[application event] ';
/** OpenAI's rule for a function name; a workflow's name may be any 1–100 characters. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const TOOL_NAME_MAX = 64;

/** A name the API accepts: each other character becomes `_`, cut to 64. */
function safeToolName(name: string): string {
  return name.replace(/[^a-zA-Z0-9_-]/gu, '_').slice(0, TOOL_NAME_MAX);
}

/**
 * The name each offered tool goes by for the model, both ways. A name the API accepts is kept;
 * another is made safe, and given a suffix (`_2`, `_3`…) when that name is taken.
 */
function toolNames(names: string[]): { forModel: Map<string, string>; fromModel: Map<string, string> } {
  const forModel = new Map<string, string>();
  const taken = new Set(names.filter((name) => TOOL_NAME.test(name)));
  for (const name of names) {
    if (TOOL_NAME.test(name)) {
      forModel.set(name, name);
      continue;
    }
    const base = safeToolName(name);
    let candidate = base;
    for (let n = 2; taken.has(candidate); n++) {
      const suffix = `_${n}`;
      candidate = base.slice(0, TOOL_NAME_MAX - suffix.length) + suffix;
    }
    taken.add(candidate);
    forModel.set(name, candidate);
  }
  const fromModel = new Map([...forModel].map(([name, safe]) => [safe, name]));
  return { forModel, fromModel };
}

function systemPrompt(request: StepRequest): string {
  const parts = [`You are ${request.agentName}, a customer support agent.`];
  if (request.instructions) parts.push(request.instructions);
  if (request.language) parts.push(`Answer in the language whose code is '${request.language}'.`);
  if (request.context && Object.keys(request.context).length > 0) {
    parts.push(`Context sent by the application (JSON): ${JSON.stringify(request.context)}`);
  }
  if (request.passages.length > 0) {
    parts.push(
      'Knowledge passages from the workspace documents. When you use one, cite it with its marker, e.g. [1]. ' +
        'If they do not answer the question, say that you do not know.',
    );
    request.passages.forEach((passage, i) => {
      parts.push(`[${i + 1}] ${passage.title}${passage.heading ? ` > ${passage.heading}` : ''}\n${passage.content}`);
    });
  } else {
    parts.push('No workspace document matches this question; if you cannot answer it, say that you do not know.');
  }
  return parts.join('\n\n');
}

function itemMessages(items: TurnItem[], forModel: Map<string, string>): ChatMessage[] {
  return items.map((item): ChatMessage => {
    if (item.type === 'input') {
      return {
        role: 'user',
        content: item.author === 'application' ? APPLICATION_PREFIX + item.content : item.content,
      };
    }
    if (item.type === 'assistant') {
      return {
        role: 'assistant',
        content: item.text === '' ? null : item.text,
        ...(item.calls.length > 0
          ? {
              tool_calls: item.calls.map((call) => ({
                id: call.call_id,
                type: 'function' as const,
                // Every name the turn called is mapped too (`namesOf`), offered now or not.
                function: {
                  name: forModel.get(call.name) ?? safeToolName(call.name),
                  arguments: JSON.stringify(call.arguments),
                },
              })),
            }
          : {}),
      };
    }
    return { role: 'tool', tool_call_id: item.call_id, content: JSON.stringify(item.output ?? null) };
  });
}

/**
 * The tools offered, then the ones the turn called earlier (a handoff or a continue may have
 * changed what is offered): named together, an earlier call never takes an offered tool's name.
 */
const namesOf = (request: StepRequest): string[] => [
  ...new Set([
    ...request.tools.map((tool) => tool.name),
    ...request.items.flatMap((item) => (item.type === 'assistant' ? item.calls.map((call) => call.name) : [])),
  ]),
];

export function chatMessages(request: StepRequest, forModel = toolNames(namesOf(request)).forModel): ChatMessage[] {
  return [
    { role: 'system', content: systemPrompt(request) },
    ...request.history.map(
      (m): ChatMessage => ({
        role: m.author === 'agent' ? 'assistant' : 'user',
        content: m.author === 'application' ? APPLICATION_PREFIX + m.content : m.content,
      }),
    ),
    ...itemMessages(request.items, forModel),
  ];
}

function parseArguments(raw: string): Record<string, unknown> {
  if (raw.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : { value: parsed };
  } catch {
    return { invalid_arguments: raw };
  }
}

/** Citations for the `[n]` markers the text uses. */
function citationsIn(text: string, request: StepRequest): Citation[] {
  const used = new Set<number>();
  for (const match of text.matchAll(/\[(\d{1,3})\]/g)) used.add(Number(match[1]));
  const citations: Citation[] = [];
  for (const n of [...used].sort((a, b) => a - b)) {
    const passage = request.passages[n - 1];
    if (!passage || citations.some((c) => c.document_id === passage.document_id)) continue;
    citations.push(citationOf(passage));
  }
  return citations;
}

function errorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
    if (typeof parsed.error?.message === 'string') return parsed.error.message;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    /* not JSON: use the text */
  }
  return body.trim().slice(0, 300) || 'no details given';
}

/**
 * Reads `data:` payloads of a Server-Sent Events body. Written here because the only SSE parser
 * installed (eventsource-parser) is a development dependency; the format needed is small.
 */
async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.search(/\r\n|\r|\n/);
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      if (line === '') {
        if (data.length > 0) yield data.join('\n');
        data = [];
      } else if (line.startsWith('data:')) {
        data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
      }
      newline = buffer.search(/\r\n|\r|\n/);
    }
  }
  if (buffer.startsWith('data:')) data.push(buffer.slice(buffer.startsWith('data: ') ? 6 : 5));
  if (data.length > 0) yield data.join('\n');
}

/** What a completion said, as it arrives: its text (each piece told to the turn), tool calls and usage. */
function completionReader(onDelta: (text: string) => void) {
  const read = { text: '', usage: undefined as Usage | undefined };
  const fragments = new Map<number, { name: string; arguments: string }>();
  const take = (choice: Choice | undefined, streamed: boolean) => {
    const part = streamed ? choice?.delta : choice?.message;
    if (typeof part?.content === 'string' && part.content !== '') {
      read.text += part.content;
      onDelta(part.content);
    }
    for (const [position, fragment] of (part?.tool_calls ?? []).entries()) {
      const index = fragment.index ?? position;
      const current = fragments.get(index) ?? { name: '', arguments: '' };
      current.name += fragment.function?.name ?? '';
      current.arguments += fragment.function?.arguments ?? '';
      fragments.set(index, current);
    }
  };
  /** The tool calls in their order, each known by the tool's own name (the engine's, the API's). */
  const calls = (fromModel: Map<string, string>): ToolCall[] =>
    [...fragments.entries()]
      .sort(([a], [b]) => a - b)
      .filter(([, fragment]) => fragment.name !== '')
      .map(([, fragment]) => ({
        call_id: newCallId(),
        name: fromModel.get(fragment.name) ?? fragment.name,
        arguments: parseArguments(fragment.arguments),
      }));
  return { read, take, calls };
}

/** Reads the answer: a stream of chunks, or one completion from a server that ignores `stream: true`. */
async function readCompletion(response: Response, reader: ReturnType<typeof completionReader>): Promise<void> {
  const type = response.headers.get('content-type') ?? '';
  if (type.includes('text/event-stream') && response.body) {
    for await (const data of sseData(response.body)) {
      if (data.trim() === '[DONE]') break;
      let chunk: { choices?: Choice[]; error?: unknown; usage?: Usage | null };
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new ProviderError('provider_error', 'The language model server sent a stream chunk that is not JSON.');
      }
      if (chunk.error !== undefined) {
        throw new ProviderError(
          'provider_error',
          `The language model server reported an error: ${errorMessage(JSON.stringify(chunk))}`,
        );
      }
      if (chunk.usage) reader.read.usage = chunk.usage;
      reader.take(chunk.choices?.[0], true);
    }
    return;
  }
  const body = (await response.json().catch(() => {
    throw new ProviderError('provider_error', 'The language model server answered with a body that is not JSON.');
  })) as { choices?: Choice[]; usage?: Usage | null };
  if (body.usage) reader.read.usage = body.usage;
  reader.take(body.choices?.[0], false);
}

/** One chat completion for a step: the request in the model's terms, its answer in the engine's. */
async function callModel(
  options: OpenAiProviderOptions,
  request: StepRequest,
  signal: AbortSignal,
): Promise<StepResult> {
  const names = toolNames(namesOf(request));
  const tools = request.tools.map((tool) => ({
    type: 'function' as const,
    function: {
      name: names.forModel.get(tool.name) ?? tool.name,
      description: tool.description,
      parameters: tool.parameters,
    },
  }));
  const messages = chatMessages(request, names.forModel);
  const response = await fetch(`${options.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream, application/json',
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    },
    body: JSON.stringify({
      model: options.model,
      stream: true,
      // Without it a streamed completion carries no `usage` (the trace's token counts).
      stream_options: { include_usage: true },
      messages,
      ...(tools.length > 0 ? { tools, tool_choice: 'auto' } : {}),
    }),
    signal,
  });
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    throw new ProviderError(
      'provider_error',
      `The language model server answered ${response.status}: ${errorMessage(text)}`,
    );
  }
  const reader = completionReader(request.onDelta);
  await readCompletion(response, reader);
  const { text, usage } = reader.read;
  const input_tokens = tokens(usage?.prompt_tokens);
  const output_tokens = tokens(usage?.completion_tokens);
  return {
    text,
    calls: reader.calls(names.fromModel),
    citations: citationsIn(text, request),
    usage: { input_tokens, output_tokens, reported: input_tokens !== null && output_tokens !== null },
    prompt: messages,
  };
}

export function createOpenAiProvider(options: OpenAiProviderOptions): Provider {
  return {
    name: 'openai',
    model: options.model,
    async step(request: StepRequest): Promise<StepResult> {
      const timeout = AbortSignal.timeout(options.timeoutMs);
      const signal = AbortSignal.any([request.signal, timeout]);
      try {
        return await callModel(options, request, signal);
      } catch (error) {
        if (error instanceof ProviderError) throw error;
        if (timeout.aborted) {
          throw new ProviderError(
            'provider_timeout',
            `The language model did not answer within ${options.timeoutMs} ms.`,
          );
        }
        if (request.signal.aborted) throw new ProviderError('provider_error', 'The turn was stopped.');
        const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
        const detail = typeof cause?.code === 'string' ? cause.code : error instanceof Error ? error.message : '';
        throw new ProviderError(
          'provider_unreachable',
          `The language model server could not be reached${detail ? ` (${detail})` : ''}.`,
        );
      }
    },
  };
}
