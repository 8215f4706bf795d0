// The client's errors. Every failure of a call is a `WorkspaceApiError`: an answer of the API with
// the spec's error body (`status`, `type`, `code`, …), or one of its subclasses for what happens on
// the way — no answer (`WorkspaceConnectionError`), no answer in time (`WorkspaceTimeoutError`),
// the caller's AbortSignal (`WorkspaceAbortError`), a message stream that breaks or ends before its
// `done` event (`WorkspaceStreamError`). Those have `status` 0 (or the stream's 200) and a `code`
// of their own, so one `catch (e) { if (e instanceof WorkspaceApiError) … }` handles them all.

/** The spec's error body: `{"error": {type, code, message, param?, doc_url, event_id?}}`. */
export interface WorkspaceErrorBody {
  type: string;
  code: string;
  message: string;
  param?: string;
  doc_url: string;
  event_id?: string;
}

/** `Retry-After` in milliseconds: whole seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export class WorkspaceApiError extends Error {
  override readonly name: string = 'WorkspaceApiError';
  /** HTTP status of the answer; 0 when none came (connection, timeout, abort). */
  readonly status: number;
  /**
   * `authentication_error`, `permission_error`, `invalid_request_error`, `rate_limit_error`,
   * `api_error`; `api_connection_error` when no answer came.
   */
  readonly type: string;
  /** The machine-readable code (`not_found`, `validation_error`, `insufficient_scope`, …). */
  readonly code: string;
  /** The parameter at fault, as a path (`files[3].path`), when one is. */
  readonly param: string | undefined;
  readonly docUrl: string | undefined;
  /** With `internal_error`: the id of the server's log entry. */
  readonly eventId: string | undefined;
  /** The server's `x-request-id`. */
  readonly requestId: string | undefined;
  /** Seconds to wait before retrying (429, 503). */
  readonly retryAfter: number | undefined;
  readonly body: WorkspaceErrorBody;

  constructor(status: number, body: WorkspaceErrorBody, headers?: Headers, options?: { cause?: unknown }) {
    super(`${status ? `${status} ` : ''}${body.code}: ${body.message}${body.param ? ` (${body.param})` : ''}`, options);
    this.status = status;
    this.type = body.type;
    this.code = body.code;
    this.param = body.param;
    this.docUrl = body.doc_url;
    this.eventId = body.event_id;
    this.body = body;
    this.requestId = headers?.get('x-request-id') ?? undefined;
    const retry = retryAfterMs(headers?.get('retry-after') ?? null);
    this.retryAfter = retry === undefined ? undefined : Math.ceil(retry / 1000);
  }

  /** The error of a non-2xx answer; `parsed` is its JSON body when already read. */
  static async fromResponse(response: Response, parsed?: unknown): Promise<WorkspaceApiError> {
    let json = parsed;
    if (json === undefined) {
      const text = await response.text().catch(() => '');
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
    }
    const error = (json as { error?: Partial<WorkspaceErrorBody> } | undefined)?.error;
    const body: WorkspaceErrorBody =
      error && typeof error.code === 'string'
        ? {
            type: String(error.type ?? 'api_error'),
            code: error.code,
            message: String(error.message ?? ''),
            doc_url: String(error.doc_url ?? ''),
            ...(error.param !== undefined ? { param: String(error.param) } : {}),
            ...(error.event_id !== undefined ? { event_id: String(error.event_id) } : {}),
          }
        : {
            // Not an answer of the API itself (a proxy, a gateway): keep what is known.
            type: 'api_error',
            code: 'http_error',
            message: `HTTP ${response.status} ${response.statusText}`.trim(),
            doc_url: '',
          };
    return new WorkspaceApiError(response.status, body, response.headers);
  }
}

const local = (code: string, message: string, type = 'api_connection_error'): WorkspaceErrorBody => ({
  type,
  code,
  message,
  doc_url: '',
});

/** No answer: the connection was refused, reset or closed before an answer (after the retries). */
export class WorkspaceConnectionError extends WorkspaceApiError {
  override readonly name: string = 'WorkspaceConnectionError';
  constructor(url: string, cause: unknown) {
    const reason = cause instanceof Error ? describeCause(cause) : String(cause);
    super(0, local('connection_error', `Could not reach ${originOf(url)}: ${reason}`), undefined, { cause });
  }
}

/** No answer (or, on a stream, no byte) within `timeoutMs`. */
export class WorkspaceTimeoutError extends WorkspaceApiError {
  override readonly name: string = 'WorkspaceTimeoutError';
  readonly timeoutMs: number;
  constructor(url: string, timeoutMs: number) {
    super(0, local('timeout', `Nothing heard from ${originOf(url)} for ${timeoutMs} ms (timeoutMs)`));
    this.timeoutMs = timeoutMs;
  }
}

/** The caller's AbortSignal fired; `cause` is the signal's reason. */
export class WorkspaceAbortError extends WorkspaceApiError {
  override readonly name: string = 'WorkspaceAbortError';
  constructor(reason: unknown) {
    super(0, local('aborted', 'The request was aborted by its AbortSignal', 'api_connection_error'), undefined, {
      cause: reason,
    });
  }
}

/**
 * A message turn's stream that broke, or ended without its `done` event (`stream_incomplete`), or
 * sent an `error` event (`stream_error`: the turn's result could not be stored). The turn itself
 * runs on at the server whatever happens to the stream: read `GET /api/v1/messages/{messageId}`.
 */
export class WorkspaceStreamError extends WorkspaceApiError {
  override readonly name: string = 'WorkspaceStreamError';
  /** The agent message of the turn, once its first event named it. */
  readonly messageId: string | undefined;
  readonly conversationId: string | undefined;
  constructor(
    status: number,
    code: 'stream_incomplete' | 'stream_error',
    message: string,
    ids: { messageId?: string | undefined; conversationId?: string | undefined; headers?: Headers; cause?: unknown },
  ) {
    super(status, local(code, message, 'api_error'), ids.headers, { cause: ids.cause });
    this.messageId = ids.messageId;
    this.conversationId = ids.conversationId;
  }
}

/** Only the origin: a URL's path and query may carry ids a log should not. */
function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'the server';
  }
}

/** undici's "fetch failed" says nothing: its cause (ECONNREFUSED, "other side closed") does. */
function describeCause(error: Error): string {
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === 'string' ? `${code} (${cause.message})` : cause.message;
  }
  return error.message;
}
