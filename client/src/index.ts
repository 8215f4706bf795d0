// The typed client of the Workspace API: openapi-fetch over the types that openapi-typescript
// generates from the service's own OpenAPI document (./schema.d.ts, `npm run generate:client`).
//
//   const ws = createWorkspaceClient({ baseUrl: 'https://acme.example.com', apiKey: process.env.WORKSPACE_API_KEY! });
//   const app = await ws.post('/api/v1/apps', { body: { name: 'help-center' } });
//   for await (const doc of ws.paginate('/api/v1/documents', { params: { query: { limit: 100 } } })) { … }
//
// - every request carries `X-API-Key`;
// - a 429 is retried after its `Retry-After` (at most `maxRetries` times, each wait at most
//   `maxRetryDelayMs`; a longer wait is not attempted and the 429 is thrown);
// - a non-2xx answer throws a `WorkspaceApiError` carrying the spec's error body;
// - `paginate` walks a list endpoint's cursor pages and yields every item; `pages` yields pages.
import createClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import type { HttpMethod, PathsWithMethod, RequiredKeysOf } from 'openapi-typescript-helpers';
import type { components, paths } from './schema.js';

export type { components, paths };
/**
 * The named schemas of the API: `Schemas['Error']` (the error body) and `Schemas['JsonRpcError']`
 * (the MCP endpoint's refusals). Resources are declared inline in their operations: name them by
 * path and method, `ResponseOf<'/api/v1/apps', 'post'>` (an app), `ItemOf<'/api/v1/documents'>`
 * (a document).
 */
export type Schemas = components['schemas'];

/** The spec's error body: `{"error": {type, code, message, param?, doc_url, event_id?}}`. */
export interface WorkspaceErrorBody {
  type: string;
  code: string;
  message: string;
  param?: string;
  doc_url: string;
  event_id?: string;
}

export class WorkspaceApiError extends Error {
  override readonly name = 'WorkspaceApiError';
  /** HTTP status of the answer. */
  readonly status: number;
  /** `authentication_error`, `permission_error`, `invalid_request_error`, `rate_limit_error`, `api_error`. */
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
  /** Seconds to wait before retrying (429). */
  readonly retryAfter: number | undefined;
  readonly body: WorkspaceErrorBody;

  constructor(status: number, body: WorkspaceErrorBody, headers?: Headers) {
    super(`${status} ${body.code}: ${body.message}${body.param ? ` (${body.param})` : ''}`);
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

/** `Retry-After` in milliseconds: whole seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export interface RetryOptions {
  /** Retries of a 429 (default 2; 0 turns retrying off). */
  maxRetries?: number;
  /** The longest single wait honoured (default 60 000 ms); a longer Retry-After is thrown at once. */
  maxRetryDelayMs?: number;
  /** Called before each wait (logging, progress). */
  onRetry?: (info: { attempt: number; delayMs: number; url: string }) => void;
}

type FetchLike = (input: Request) => Promise<Response>;

/**
 * A fetch that retries 429 answers after their `Retry-After` (1 s, then 2 s, … when the header is
 * missing). A 429 means the server did not act on the request, so every method may be retried.
 */
export function retryingFetch(base: FetchLike, options: RetryOptions = {}): FetchLike {
  const maxRetries = Math.max(0, options.maxRetries ?? 2);
  const maxDelay = options.maxRetryDelayMs ?? 60_000;
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const response = await base(attempt < maxRetries ? request.clone() : request);
      if (response.status !== 429 || attempt >= maxRetries) return response;
      const delayMs = retryAfterMs(response.headers.get('retry-after')) ?? 1000 * 2 ** attempt;
      if (delayMs > maxDelay) return response;
      await response.body?.cancel().catch(() => undefined);
      options.onRetry?.({ attempt: attempt + 1, delayMs, url: request.url });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  };
}

export interface WorkspaceClientOptions extends RetryOptions {
  /** The workspace's base URL, e.g. `https://acme.example.com` (no `/api/v1`). */
  baseUrl: string;
  /** An API key (`wsk_…`), sent as `X-API-Key`. */
  apiKey: string;
  /** A fetch implementation (default: the global one). */
  fetch?: (input: Request) => Promise<Response>;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

type Method = Extract<HttpMethod, 'get' | 'post' | 'put' | 'patch' | 'delete'>;
type JsonMedia = `${string}/json`;
type InitArgs<Init> =
  RequiredKeysOf<Init> extends never ? [(Init & { [key: string]: unknown })?] : [Init & { [key: string]: unknown }];
/**
 * The success body of `method path`, as JSON: the methods below parse every answer as JSON. (The
 * message turns may also answer `text/event-stream` when asked; read those through `raw` with
 * `parseAs: 'stream'`.)
 */
export type ResponseOf<P extends keyof paths, M extends Method, Init = Record<never, never>> = NonNullable<
  // biome-ignore lint/suspicious/noExplicitAny: constraint of openapi-fetch's FetchResponse.
  FetchResponse<paths[P][M] & Record<string | number, any>, Init, JsonMedia>['data']
>;
type DataMethod<M extends Method> = <P extends PathsWithMethod<paths, M>, Init extends MaybeOptionalInit<paths[P], M>>(
  url: P,
  ...init: InitArgs<Init>
) => Promise<ResponseOf<P, M, Init>>;

type GetPath = PathsWithMethod<paths, 'get'>;
/** The GET paths that answer a cursor list `{object: "list", data, has_more, next_cursor}`. */
export type ListPath = {
  [P in GetPath]: ResponseOf<P, 'get'> extends { data: unknown[]; has_more: boolean; next_cursor: unknown } ? P : never;
}[GetPath];
/** One item of a list endpoint. */
export type ItemOf<P extends ListPath> = ResponseOf<P, 'get'> extends { data: (infer T)[] } ? T : never;

export interface WorkspaceClient {
  get: DataMethod<'get'>;
  post: DataMethod<'post'>;
  put: DataMethod<'put'>;
  patch: DataMethod<'patch'>;
  delete: DataMethod<'delete'>;
  /** Every item of a list endpoint, following `next_cursor` page after page. */
  paginate<P extends ListPath, Init extends MaybeOptionalInit<paths[P], 'get'>>(
    url: P,
    ...init: InitArgs<Init>
  ): AsyncGenerator<ItemOf<P>, void, undefined>;
  /** Every page of a list endpoint. */
  pages<P extends ListPath, Init extends MaybeOptionalInit<paths[P], 'get'>>(
    url: P,
    ...init: InitArgs<Init>
  ): AsyncGenerator<ResponseOf<P, 'get'>, void, undefined>;
  /** The underlying openapi-fetch client (answers `{data, error, response}`; non-2xx still throw). */
  raw: Client<paths>;
}

export function createWorkspaceClient(options: WorkspaceClientOptions): WorkspaceClient {
  if (!options.apiKey) throw new TypeError('createWorkspaceClient: apiKey is required');
  const baseFetch: FetchLike = options.fetch ?? ((request) => globalThis.fetch(request));
  const raw = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: retryingFetch(baseFetch, options),
    headers: { ...options.headers, 'X-API-Key': options.apiKey },
  });
  raw.use({
    async onResponse({ response }) {
      if (!response.ok) throw await WorkspaceApiError.fromResponse(response);
    },
  });

  const call =
    (method: Method) =>
    async (url: string, init?: Record<string, unknown>): Promise<unknown> => {
      // biome-ignore lint/suspicious/noExplicitAny: the public signatures above carry the types.
      const result = await (raw.request as any)(method, url, init);
      return result.data;
    };

  // biome-ignore lint/suspicious/noExplicitAny: the public signatures above carry the types.
  type Loose = (url: string, init?: any) => Promise<any>;
  const get = call('get') as Loose;

  async function* pages(url: string, init?: { params?: { query?: Record<string, unknown> } }) {
    let cursor: string | undefined;
    const seen = new Set<string>();
    for (;;) {
      const query = { ...init?.params?.query, ...(cursor ? { cursor } : {}) };
      const page = (await get(url, { ...init, params: { ...init?.params, query } })) as {
        data: unknown[];
        has_more: boolean;
        next_cursor: string | null;
      };
      yield page;
      if (!page.has_more || !page.next_cursor || seen.has(page.next_cursor)) return;
      seen.add(page.next_cursor);
      cursor = page.next_cursor;
    }
  }

  async function* paginate(url: string, init?: { params?: { query?: Record<string, unknown> } }) {
    for await (const page of pages(url, init)) yield* page.data;
  }

  return {
    get: call('get') as WorkspaceClient['get'],
    post: call('post') as WorkspaceClient['post'],
    put: call('put') as WorkspaceClient['put'],
    patch: call('patch') as WorkspaceClient['patch'],
    delete: call('delete') as WorkspaceClient['delete'],
    paginate: paginate as unknown as WorkspaceClient['paginate'],
    pages: pages as unknown as WorkspaceClient['pages'],
    raw,
  };
}
