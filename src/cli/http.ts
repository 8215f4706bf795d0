// The `workspace` command's calls to a server: the public API with an API key (`X-API-Key`), the
// control plane with the operator token (`Authorization: Bearer`). A 429 waits for its
// Retry-After (the client's retryingFetch); a non-2xx answer throws the API's error.
import { retryingFetch, WorkspaceApiError } from '../../client/src/index.js';
import { CommandError, UsageError } from './errors.js';

export type Json = Record<string, unknown>;

export interface Connection {
  url: string;
  /** `{ apiKey }` for the public API, `{ token }` for the control plane. */
  credential: { apiKey: string } | { token: string };
  /** Where a wait for Retry-After is announced. */
  err: NodeJS.WritableStream;
}

/** The server's base URL: `--url`, then WORKSPACE_URL, then this machine's PORT. */
export function serverUrl(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const port = env.PORT && /^\d+$/.test(env.PORT) ? env.PORT : '8080';
  const url = (flag ?? env.WORKSPACE_URL ?? `http://127.0.0.1:${port}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]/.test(url)) {
    throw new UsageError(`--url takes an http(s) address, got '${url}'.`, 'invalid_value', '--url');
  }
  return url;
}

export function headers(connection: Connection, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...('apiKey' in connection.credential
      ? { 'x-api-key': connection.credential.apiKey }
      : { authorization: `Bearer ${connection.credential.token}` }),
    ...extra,
  };
}

/** Sends a request (429s retried) and answers the response; a network failure is a CommandError. */
export async function send(connection: Connection, request: Request): Promise<Response> {
  const fetchWithRetries = retryingFetch((r) => fetch(r), {
    maxRetries: 3,
    onRetry: (info) => {
      const why =
        info.reason === 'rate_limited'
          ? 'rate limited'
          : info.reason === 'unavailable'
            ? 'server unavailable'
            : 'no answer';
      connection.err.write(`${why}: retrying in ${Math.ceil(info.delayMs / 1000)} s\n`);
    },
  });
  try {
    return await fetchWithRetries(request);
  } catch {
    throw new CommandError(
      `Cannot reach the server at ${connection.url}: is the URL right and the server running?`,
      'server_unreachable',
    );
  }
}

/** One JSON call: JSON in, JSON out; errors throw WorkspaceApiError. */
export async function call(
  connection: Connection,
  method: 'GET' | 'POST' | 'DELETE',
  pathname: string,
  body?: unknown,
): Promise<Json> {
  const response = await send(
    connection,
    new Request(`${connection.url}${pathname}`, {
      method,
      headers: headers(connection, {
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      }),
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }),
  );
  if (!response.ok) throw await WorkspaceApiError.fromResponse(response);
  return (await response.json()) as Json;
}

/** Every item of a list endpoint, following `next_cursor` (100 a page). */
export async function listAll(connection: Connection, pathname: string): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | null = null;
  do {
    const separator = pathname.includes('?') ? '&' : '?';
    const page = await call(
      connection,
      'GET',
      `${pathname}${separator}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    items.push(...((page.data as Json[]) ?? []));
    cursor = page.has_more ? ((page.next_cursor as string | null) ?? null) : null;
  } while (cursor);
  return items;
}
