// One attempt: the signed event POSTed to the endpoint, through the SSRF guard, redirects not
// followed, answered by its status alone.
import { OutboundRequestError, safeRequest } from '../../lib/ssrf.js';

/** Bytes of a receiver's answer read at most; it is not kept, only its status. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const MAX_ERROR_LENGTH = 500;
const USER_AGENT = 'Workspace-Webhooks/1.0';

/** What an attempt came to, as the delivery log records it. */
export interface Outcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
}

export interface AttemptOptions {
  allowPrivateTargets: boolean;
  /** One attempt may take this long, connection to last byte. */
  timeoutMs: number;
}

/**
 * POSTs `body` to `url`. The endpoint's failures (non-2xx, timeouts, network errors, an address
 * refused) are an outcome; ours (stopping, a lost lease) throw.
 */
export async function attempt(
  options: AttemptOptions,
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
): Promise<Outcome> {
  try {
    const response = await safeRequest(url, {
      allowPrivate: options.allowPrivateTargets,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
      body,
      timeoutMs: options.timeoutMs,
      // Only the status counts: a long answer is read to its first 64 KiB, and is a success if 2xx.
      maxBytes: MAX_RESPONSE_BYTES,
      truncate: true,
      maxRedirects: 0,
      signal,
    });
    const ok = response.status >= 200 && response.status < 300;
    const redirect = response.status >= 300 && response.status < 400;
    return {
      ok,
      statusCode: response.status,
      error: ok
        ? null
        : redirect
          ? `The endpoint answered ${response.status}; redirects are not followed.`
          : `The endpoint answered ${response.status}.`,
    };
  } catch (error) {
    // Stopping or losing the lease is ours, not the endpoint's: the queue runs the job again.
    if (signal.aborted || !(error instanceof OutboundRequestError)) throw error;
    return { ok: false, statusCode: null, error: error.message.slice(0, MAX_ERROR_LENGTH) };
  }
}
