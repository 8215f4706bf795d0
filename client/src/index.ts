// The typed client of the Workspace API: openapi-fetch over the types that openapi-typescript
// generates from the service's own OpenAPI document (./schema.d.ts, `npm run generate:client`).
//
//   const ws = createWorkspaceClient({ baseUrl: 'https://acme.example.com', apiKey: process.env.WORKSPACE_API_KEY! });
//   const app = await ws.post('/api/v1/apps', { body: { name: 'help-center' } });
//   for await (const doc of ws.paginate('/api/v1/documents', { params: { query: { limit: 100 } } })) { … }
//   for await (const e of ws.streamMessage({ content: 'Hello' })) { … }
//
// - every request carries `X-API-Key`;
// - 429, 503 and network errors are retried with backoff, honouring `Retry-After`; a POST gets an
//   `Idempotency-Key` so a retry is not run twice; each attempt has a timeout (./transport.ts);
// - a non-2xx answer throws a `WorkspaceApiError` carrying the spec's error body (./errors.ts);
// - `paginate` walks a list endpoint's cursor pages and yields every item; `pages` yields pages;
// - `streamMessage` and `streamContinue` read a message turn as typed events (./stream.ts).
import createClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import type { HttpMethod, PathsWithMethod, RequiredKeysOf } from 'openapi-typescript-helpers';
import { WorkspaceApiError } from './errors.js';
import type { components, paths } from './schema.js';
import {
  type ContinueMessageBody,
  type Message,
  readTurnEvents,
  type SendMessageBody,
  type StreamOptions,
  TurnStream,
} from './stream.js';
import { createTransport, type FetchLike, type TransportOptions } from './transport.js';

export {
  retryAfterMs,
  WorkspaceAbortError,
  WorkspaceApiError,
  WorkspaceConnectionError,
  type WorkspaceErrorBody,
  WorkspaceStreamError,
  WorkspaceTimeoutError,
} from './errors.js';
export {
  type ContinueMessageBody,
  type Message,
  type SendMessageBody,
  type StreamOptions,
  type TurnEvent,
  type TurnEventName,
  type TurnEventOf,
  type TurnIds,
  TurnStream,
} from './stream.js';
export {
  backoffMs,
  createTransport,
  type FetchLike,
  type RetryInfo,
  type RetryOptions,
  retryingFetch,
  type SendOptions,
  type TransportOptions,
} from './transport.js';
export type { components, paths };
/**
 * The named schemas of the API: `Schemas['Error']` (the error body) and `Schemas['JsonRpcError']`
 * (the MCP endpoint's refusals). Resources are declared inline in their operations: name them by
 * path and method, `ResponseOf<'/api/v1/apps', 'post'>` (an app), `ItemOf<'/api/v1/documents'>`
 * (a document).
 */
export type Schemas = components['schemas'];

export interface WorkspaceClientOptions extends TransportOptions {
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
/** What every call takes besides openapi-fetch's own options (`signal` among them). */
export interface CallOptions {
  /** This call's timeout per attempt, in place of the client's `timeoutMs`. */
  timeoutMs?: number;
}
type InitArgs<Init> =
  RequiredKeysOf<Init> extends never
    ? [(Init & CallOptions & { [key: string]: unknown })?]
    : [Init & CallOptions & { [key: string]: unknown }];
/**
 * The success body of `method path`, as JSON. (A message turn asked for `text/event-stream`
 * through these methods is read to its end and answers the `done` event's message; read its
 * events with `streamMessage` / `streamContinue`.)
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
  /**
   * A message turn (`POST /api/v1/messages`) as a stream of typed events, ending with `done`.
   * The request is sent when iteration starts.
   */
  streamMessage(body: SendMessageBody, options?: StreamOptions): TurnStream;
  /** A paused turn resumed (`POST /api/v1/messages/{id}/continue`) as a stream of typed events. */
  streamContinue(messageId: string, body?: ContinueMessageBody, options?: StreamOptions): TurnStream;
  /** The underlying openapi-fetch client (answers `{data, error, response}`; non-2xx still throw). */
  raw: Client<paths>;
}

export function createWorkspaceClient(options: WorkspaceClientOptions): WorkspaceClient {
  if (!options.apiKey) throw new TypeError('createWorkspaceClient: apiKey is required');
  const baseFetch: FetchLike = options.fetch ?? ((request) => globalThis.fetch(request));
  const send = createTransport(baseFetch, options);
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const headers = { ...options.headers, 'X-API-Key': options.apiKey };
  const raw = createClient<paths>({
    baseUrl,
    // `timeoutMs` given to a call (`ws.get(path, { timeoutMs })`) is set on its Request.
    fetch: (request) => send(request, { timeoutMs: (request as { timeoutMs?: number }).timeoutMs }),
    headers,
  });
  raw.use({
    async onResponse({ response, options: call }) {
      if (!response.ok) throw await WorkspaceApiError.fromResponse(response);
      if (call.parseAs === 'json' && /^text\/event-stream/i.test(response.headers.get('content-type') ?? '')) {
        return await finalMessageOf(response);
      }
      return undefined;
    },
  });

  const turn = (path: string, body: unknown, stream: StreamOptions = {}) => {
    const request = new Request(`${baseUrl}${path}`, {
      method: 'POST',
      headers: {
        ...headers,
        ...stream.headers,
        'Content-Type': 'application/json',
        Accept: 'text/event-stream',
        ...(stream.idempotencyKey !== undefined ? { 'Idempotency-Key': stream.idempotencyKey } : {}),
      },
      body: JSON.stringify(body),
    });
    return new TurnStream(send, request, stream);
  };

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
    streamMessage: (body, stream) => turn('/api/v1/messages', body, stream),
    streamContinue: (messageId, body, stream) =>
      turn(`/api/v1/messages/${encodeURIComponent(messageId)}/continue`, body ?? {}, stream),
    raw,
  };
}

/** A turn's stream read to its end, answered as the JSON of its `done` event's message. */
async function finalMessageOf(response: Response): Promise<Response> {
  let message: Message | undefined;
  for await (const event of readTurnEvents(response)) if (event.event === 'done') message = event.data.message;
  const headers = new Headers(response.headers);
  headers.set('content-type', 'application/json');
  return new Response(JSON.stringify(message), { status: response.status, headers });
}
