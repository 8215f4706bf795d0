// A client of an OpenAI-compatible embeddings API (OpenAI, Azure, vLLM, Ollama, LM Studio, TEI):
// `POST {EMBEDDINGS_BASE_URL}/embeddings` with `{model, input: string[]}`, answered by
// `{data: [{index, embedding}]}`. Inputs go in batches; each call has a timeout; a 429, a 5xx or a
// network failure is retried with exponential backoff (a Retry-After is honoured, within a bound).
// Every failure is an EmbeddingsError naming what went wrong, never the API key.
//
// The server is an operator setting (as LLM_BASE_URL), not a tenant's: it may be on the private
// network (a local model server), so no SSRF rule applies. Redirects are refused: a POST carrying
// the key is sent only where the operator said.
import { SpanKind } from '@opentelemetry/api';
import { recordEmbeddingsRequest } from '../../../observability/metrics.js';
import { withSpan } from '../../../observability/tracing.js';

/** Inputs sent in one request. */
export const EMBEDDINGS_BATCH_SIZE = 64;

export interface EmbeddingsClientOptions {
  /** The API root, e.g. `https://api.openai.com/v1`; `/embeddings` is appended. */
  baseUrl: string;
  apiKey?: string | undefined;
  model: string;
  /** One request may take this long. */
  timeoutMs: number;
  batchSize?: number;
  /** Retries of one batch after a 429, a 5xx or a network failure (3 unless set). */
  retries?: number;
  /** The first retry's delay; it doubles with each retry (500 ms unless set). */
  retryBaseMs?: number;
  /** The longest wait before a retry, Retry-After included (10 s unless set). */
  retryMaxMs?: number;
}

export interface EmbedOptions {
  /** Stops the calls and the waits between them. */
  signal?: AbortSignal;
  /** Overrides the client's retries for this call (a question being answered waits for none, say). */
  retries?: number;
}

export type EmbeddingsErrorReason = 'timeout' | 'unreachable' | 'rejected' | 'invalid_response' | 'aborted';

export class EmbeddingsError extends Error {
  constructor(
    message: string,
    /** `rejected`: the server answered an error status (`status`); `aborted`: the caller stopped. */
    readonly reason: EmbeddingsErrorReason,
    readonly status?: number,
    /** How long the server asked to wait before another try (its Retry-After). */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'EmbeddingsError';
  }

  /** Worth another try: a 429, a 5xx, a timeout or a network failure. */
  get retryable(): boolean {
    if (this.reason === 'rejected') return this.status === 429 || (this.status ?? 0) >= 500;
    return this.reason === 'timeout' || this.reason === 'unreachable';
  }
}

export interface EmbeddingsClient {
  readonly model: string;
  /** One vector per input, in the inputs' order. */
  embed(inputs: string[], options?: EmbedOptions): Promise<number[][]>;
}

/** The server's error message when it sent one (OpenAI's `{error: {message}}`), cut short. */
function serverMessage(text: string): string {
  let message = text;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const candidate =
      typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message ?? undefined);
    if (typeof candidate === 'string') message = candidate;
  } catch {
    // Not JSON: the text as it is.
  }
  message = message.replace(/\s+/g, ' ').trim();
  return message.length > 300 ? `${message.slice(0, 300)}…` : message || '(no message)';
}

/** Retry-After in milliseconds (seconds or an HTTP date), when the server sent one. */
function retryAfterMs(header: string | null): number | undefined {
  if (header === null) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new EmbeddingsError('The embeddings request was stopped.', 'aborted'));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new EmbeddingsError('The embeddings request was stopped.', 'aborted'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The vectors of an answer, checked: one per input, each of finite numbers, all of one length. */
function vectorsOf(body: unknown, count: number): number[][] {
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) {
    throw new EmbeddingsError('The embeddings server answered without a `data` list.', 'invalid_response');
  }
  if (data.length !== count) {
    throw new EmbeddingsError(
      `The embeddings server answered ${data.length} embeddings for ${count} inputs.`,
      'invalid_response',
    );
  }
  const vectors: number[][] = new Array(count);
  data.forEach((item: { index?: unknown; embedding?: unknown }, position) => {
    const index = typeof item?.index === 'number' ? item.index : position;
    const embedding = item?.embedding;
    if (
      !Number.isInteger(index) ||
      index < 0 ||
      index >= count ||
      vectors[index] !== undefined ||
      !Array.isArray(embedding) ||
      embedding.length === 0 ||
      !embedding.every((x) => typeof x === 'number' && Number.isFinite(x))
    ) {
      throw new EmbeddingsError(
        `The embeddings server's embedding ${position} is not a list of numbers for one input (set encoding_format to float).`,
        'invalid_response',
      );
    }
    vectors[index] = embedding as number[];
  });
  const dimensions = vectors[0]?.length;
  if (vectors.some((vector) => vector.length !== dimensions)) {
    throw new EmbeddingsError('The embeddings server answered embeddings of different lengths.', 'invalid_response');
  }
  return vectors;
}

export function createEmbeddingsClient(options: EmbeddingsClientOptions): EmbeddingsClient {
  const endpoint = `${options.baseUrl.replace(/\/+$/, '')}/embeddings`;
  const batchSize = options.batchSize ?? EMBEDDINGS_BATCH_SIZE;
  const retryBaseMs = options.retryBaseMs ?? 500;
  const retryMaxMs = options.retryMaxMs ?? 10_000;

  /**
   * One request in a span of its own (under a job's run or a turn's operation), counted by
   * outcome (embeddings_requests_total), its failures as EmbeddingsErrors.
   */
  const post = (inputs: string[], signal: AbortSignal | undefined): Promise<number[][]> =>
    withSpan(
      'embeddings.call',
      { 'embeddings.model': options.model, 'embeddings.inputs': inputs.length },
      () =>
        request(inputs, signal).then(
          (vectors) => {
            recordEmbeddingsRequest('succeeded');
            return vectors;
          },
          (error: unknown) => {
            recordEmbeddingsRequest(error instanceof EmbeddingsError ? error.reason : 'unreachable');
            throw error;
          },
        ),
      { kind: SpanKind.CLIENT },
    );

  async function request(inputs: string[], signal: AbortSignal | undefined): Promise<number[][]> {
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let response: Response;
    let text: string;
    try {
      response = await fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: options.model, input: inputs, encoding_format: 'float' }),
        redirect: 'error',
        signal: combined,
      });
      text = await response.text();
    } catch (error) {
      if (signal?.aborted) throw new EmbeddingsError('The embeddings request was stopped.', 'aborted');
      if (timeout.aborted) {
        throw new EmbeddingsError(`The embeddings server did not answer within ${options.timeoutMs} ms.`, 'timeout');
      }
      const cause = (error as { cause?: { code?: unknown } }).cause;
      const detail = typeof cause?.code === 'string' ? ` (${cause.code})` : '';
      throw new EmbeddingsError(`The embeddings server could not be reached${detail}.`, 'unreachable');
    }
    if (!response.ok) {
      throw new EmbeddingsError(
        `The embeddings server answered ${response.status}: ${serverMessage(text)}`,
        'rejected',
        response.status,
        retryAfterMs(response.headers.get('retry-after')),
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new EmbeddingsError('The embeddings server answered with something other than JSON.', 'invalid_response');
    }
    return vectorsOf(body, inputs.length);
  }

  /** One batch, retried while its failure is worth another try and retries are left. */
  async function batch(inputs: string[], embedOptions: EmbedOptions): Promise<number[][]> {
    const retries = embedOptions.retries ?? options.retries ?? 3;
    for (let attempt = 0; ; attempt++) {
      try {
        return await post(inputs, embedOptions.signal);
      } catch (error) {
        if (!(error instanceof EmbeddingsError) || !error.retryable || attempt >= retries) throw error;
        const asked = error.retryAfterMs;
        const backoff = retryBaseMs * 2 ** attempt * (0.5 + Math.random() / 2);
        await sleep(Math.min(asked ?? backoff, retryMaxMs), embedOptions.signal);
      }
    }
  }

  return {
    model: options.model,
    async embed(inputs: string[], embedOptions: EmbedOptions = {}): Promise<number[][]> {
      const vectors: number[][] = [];
      for (let start = 0; start < inputs.length; start += batchSize) {
        vectors.push(...(await batch(inputs.slice(start, start + batchSize), embedOptions)));
      }
      return vectors;
    },
  };
}
