// How the client sends one request: retries with backoff, a timeout per attempt, the caller's
// AbortSignal, and an Idempotency-Key on POSTs so a retry is never run twice by the server.
//
// - Retried: 429 and 503 (the server did not act on the request) and network errors (no answer
//   came); each waits `Retry-After` when the answer has one, else an exponential backoff with
//   jitter (0.5 s, 1 s, 2 s, … up to 8 s, each between half and all of that), at most
//   `maxRetries` times. A `Retry-After` longer than `maxRetryDelayMs` is not waited for: that
//   answer is returned at once.
// - `timeoutMs` bounds each attempt: until the whole answer has arrived, or for a stream (an
//   `Accept: text/event-stream` request) until its headers and then between two chunks (the
//   server sends a keep-alive comment while a turn waits). A timed-out attempt is not retried: it
//   throws `WorkspaceTimeoutError`.
// - A POST without an `Idempotency-Key` gets one when it may be retried, the same on every attempt
//   of the call, so a POST whose answer was lost is answered from the first run, not run again.
import { retryAfterMs, WorkspaceAbortError, WorkspaceConnectionError, WorkspaceTimeoutError } from './errors.js';

export type FetchLike = (input: Request) => Promise<Response>;

export interface RetryInfo {
  /** 1 for the first retry. */
  attempt: number;
  delayMs: number;
  url: string;
  /** `rate_limited` (429), `unavailable` (503) or `connection_error` (no answer). */
  reason: 'rate_limited' | 'unavailable' | 'connection_error';
  /** The status that is retried; absent for a connection error. */
  status?: number;
}

export interface RetryOptions {
  /** Retries of a 429, a 503 or a network error (default 2; 0 turns retrying off). */
  maxRetries?: number;
  /** The longest single wait honoured (default 60 000 ms); a longer Retry-After is returned at once. */
  maxRetryDelayMs?: number;
  /** Called before each wait (logging, progress). */
  onRetry?: (info: RetryInfo) => void;
}

export interface TransportOptions extends RetryOptions {
  /** Per attempt: the whole answer, or a stream's headers and then each gap between chunks (default 120 000 ms; 0: none). */
  timeoutMs?: number;
}

/** Per call: the caller's signal and timeout (both default to the request's and the client's). */
export interface SendOptions {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

export const DEFAULT_TIMEOUT_MS = 120_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(new WorkspaceAbortError(signal.reason));
    const done = () => {
      clearTimeout(timer);
      reject(new WorkspaceAbortError(signal.reason));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', done);
      resolve();
    }, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/** The wait before retry `attempt` (0-based) when the answer names none: exponential, jittered. */
export function backoffMs(attempt: number, random = Math.random): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Statuses a Response may not be given a body for (the Fetch standard's null body statuses). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

const asksForStream = (request: Request) => /text\/event-stream/i.test(request.headers.get('accept') ?? '');

/**
 * A sender of requests with retries, timeouts and idempotency keys (see the module's header).
 * Throws `WorkspaceConnectionError`, `WorkspaceTimeoutError` or `WorkspaceAbortError` when no
 * answer can be had; any answer (2xx or not) is returned for the caller to read.
 */
export function createTransport(base: FetchLike, options: TransportOptions = {}) {
  const maxRetries = Math.max(0, options.maxRetries ?? 2);
  const maxDelay = options.maxRetryDelayMs ?? 60_000;

  return async function send(original: Request, call: SendOptions = {}): Promise<Response> {
    const signal = call.signal ?? original.signal;
    const timeoutMs = call.timeoutMs ?? options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    let request = original;
    if (request.method === 'POST' && maxRetries > 0 && !request.headers.has('idempotency-key')) {
      const headers = new Headers(request.headers);
      headers.set('idempotency-key', globalThis.crypto.randomUUID());
      request = new Request(request, { headers });
    }
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw new WorkspaceAbortError(signal.reason);
      const last = attempt >= maxRetries;
      let response: Response;
      try {
        response = await attemptOnce(base, last ? request : request.clone(), signal, timeoutMs);
      } catch (error) {
        if (!(error instanceof WorkspaceConnectionError) || last) throw error;
        const delayMs = backoffMs(attempt);
        options.onRetry?.({ attempt: attempt + 1, delayMs, url: request.url, reason: 'connection_error' });
        await sleep(delayMs, signal);
        continue;
      }
      if ((response.status !== 429 && response.status !== 503) || last) return response;
      const delayMs = retryAfterMs(response.headers.get('retry-after')) ?? backoffMs(attempt);
      if (delayMs > maxDelay) return response;
      await response.body?.cancel().catch(() => undefined);
      const reason = response.status === 429 ? 'rate_limited' : 'unavailable';
      options.onRetry?.({ attempt: attempt + 1, delayMs, url: request.url, reason, status: response.status });
      await sleep(delayMs, signal);
    }
  };
}

/** One attempt: the answer whole (a stream: its headers, then chunks watched for idleness). */
async function attemptOnce(base: FetchLike, request: Request, signal: AbortSignal, timeoutMs: number) {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    if (timeoutMs <= 0) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new WorkspaceTimeoutError(request.url, timeoutMs));
    }, timeoutMs);
  };
  const settle = () => {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  };
  const failure = (error: unknown) => {
    if (timedOut) return new WorkspaceTimeoutError(request.url, timeoutMs);
    if (signal.aborted) return new WorkspaceAbortError(signal.reason);
    return new WorkspaceConnectionError(request.url, error);
  };

  arm();
  try {
    const response = await base(new Request(request, { signal: controller.signal }));
    if (!asksForStream(request) || !response.body || !response.ok) {
      const body = await response.arrayBuffer();
      settle();
      return new Response(NULL_BODY_STATUSES.has(response.status) ? null : body, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    }
    arm(); // from the headers on, the timeout is the longest silence between two chunks
    return new Response(watchedBody(response.body, arm, settle, failure), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  } catch (error) {
    settle();
    throw failure(error);
  }
}

/** A stream's body whose every chunk re-arms the idle timer, and whose failures are typed. */
function watchedBody(
  body: ReadableStream<Uint8Array>,
  arm: () => void,
  settle: () => void,
  failure: (error: unknown) => Error,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          settle();
          controller.close();
          return;
        }
        arm();
        controller.enqueue(value);
      } catch (error) {
        settle();
        controller.error(failure(error));
      }
    },
    async cancel(reason) {
      settle();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
}

/**
 * A fetch that retries 429 and 503 answers after their `Retry-After` and network errors after a
 * backoff (see the module's header); no timeout unless `timeoutMs` is given.
 */
export function retryingFetch(base: FetchLike, options: TransportOptions = {}): FetchLike {
  const send = createTransport(base, { timeoutMs: 0, ...options });
  return (request) => send(request);
}
