// The typed client (client/) against a live listener: typed calls, the spec's error body
// as a WorkspaceApiError, 429 retried after Retry-After, and cursor pagination over several pages.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspaceClient, type ResponseOf, retryAfterMs, WorkspaceApiError } from '../../client/src/index.js';
import { startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let base = '';

beforeAll(async () => {
  t = await startTestApp();
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => t.close());

/** A fetch that counts what it sends, around the real one. */
function countingFetch() {
  const seen: { method: string; url: string; status: number; at: number }[] = [];
  const fetch = async (request: Request) => {
    const response = await globalThis.fetch(request);
    seen.push({ method: request.method, url: request.url, status: response.status, at: Date.now() });
    return response;
  };
  return { fetch, seen };
}

async function caught(promise: Promise<unknown>): Promise<WorkspaceApiError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof WorkspaceApiError) return error;
    throw error;
  }
  throw new Error('expected a WorkspaceApiError');
}

describe('typed calls', () => {
  it('creates, commits to and reads an app through typed calls, sending X-API-Key', async () => {
    const { key } = await t.tenant(['apps:write']);
    const { fetch, seen } = countingFetch();
    const ws = createWorkspaceClient({ baseUrl: `${base}/`, apiKey: key, fetch });

    const app: ResponseOf<'/api/v1/apps', 'post'> = await ws.post('/api/v1/apps', {
      body: { name: 'help-center', description: 'FAQ' },
    });
    expect(app).toMatchObject({ object: 'app', name: 'help-center', description: 'FAQ', file_count: 0 });

    const commit = await ws.post('/api/v1/apps/{name}/commits', {
      params: { path: { name: 'help-center' } },
      body: { message: 'first', files: [{ path: 'index.html', content: '<h1>Hi</h1>' }] },
    });
    const change: 'added' | 'modified' | 'deleted' | undefined = commit.files[0]?.change;
    expect(change).toBe('added');

    const fetched = await ws.get('/api/v1/apps/{name}', { params: { path: { name: 'help-center' } } });
    expect(fetched).toMatchObject({ head_commit_id: commit.id, file_count: 1 });
    expect(seen.map((s) => `${s.method} ${new URL(s.url).pathname} ${s.status}`)).toEqual([
      'POST /api/v1/apps 201',
      'POST /api/v1/apps/help-center/commits 200',
      'GET /api/v1/apps/help-center 200',
    ]);

    // The types refuse what the API would refuse (checked by `tsc --noEmit`).
    // @ts-expect-error `nmae` is not a field of Create App.
    await caught(ws.post('/api/v1/apps', { body: { nmae: 'typo' } }));
    // @ts-expect-error there is no such path.
    await caught(ws.get('/api/v1/no-such-thing'));
  });

  it('a non-2xx answer throws a WorkspaceApiError with the spec body: status, type, code, param, doc_url', async () => {
    const { key } = await t.tenant(['apps:write']);
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });

    const invalid = await caught(ws.post('/api/v1/apps', { body: { name: '' } }));
    expect(invalid).toMatchObject({
      status: 422,
      type: 'invalid_request_error',
      code: 'validation_error',
      param: 'name',
    });
    expect(invalid.docUrl).toMatch(/\/docs\/errors#validation_error$/);
    expect(invalid.requestId).toBeTruthy();
    expect(invalid.message).toContain('validation_error');

    const missing = await caught(ws.get('/api/v1/apps/{name}', { params: { path: { name: 'nope' } } }));
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });

    await ws.post('/api/v1/apps', { body: { name: 'taken' } });
    expect(await caught(ws.post('/api/v1/apps', { body: { name: 'taken' } }))).toMatchObject({
      status: 409,
      code: 'conflict',
    });

    const scope = await caught(ws.get('/api/v1/tasks'));
    expect(scope).toMatchObject({ status: 403, type: 'permission_error', code: 'insufficient_scope' });

    const badKey = createWorkspaceClient({ baseUrl: base, apiKey: 'wsk_wrong' });
    expect(await caught(badKey.get('/api/v1/apps'))).toMatchObject({
      status: 401,
      type: 'authentication_error',
      code: 'invalid_api_key',
    });
  });
});

describe('pagination', () => {
  it('paginate yields every item of a list across pages, newest first, following next_cursor', async () => {
    const { key } = await t.tenant(['apps:write']);
    const ws = createWorkspaceClient({ baseUrl: base, apiKey: key });
    const names = Array.from({ length: 23 }, (_, i) => `app-${String(i).padStart(2, '0')}`);
    for (const name of names) await ws.post('/api/v1/apps', { body: { name } });

    const { fetch, seen } = countingFetch();
    const counted = createWorkspaceClient({ baseUrl: base, apiKey: key, fetch });
    const all: string[] = [];
    for await (const app of counted.paginate('/api/v1/apps', { params: { query: { limit: 10 } } })) {
      all.push(app.name);
    }
    expect(all).toEqual([...names].reverse());
    expect(seen).toHaveLength(3);
    expect(seen.map((s) => new URL(s.url).searchParams.get('limit'))).toEqual(['10', '10', '10']);
    expect(new URL(seen[0]?.url ?? '').searchParams.has('cursor')).toBe(false);
    expect(new URL(seen[1]?.url ?? '').searchParams.get('cursor')).toBeTruthy();

    const sizes: number[] = [];
    for await (const page of ws.pages('/api/v1/apps', { params: { query: { limit: 20 } } }))
      sizes.push(page.data.length);
    expect(sizes).toEqual([20, 3]);

    // Leaving the loop early stops fetching.
    const early = countingFetch();
    const stopper = createWorkspaceClient({ baseUrl: base, apiKey: key, fetch: early.fetch });
    for await (const app of stopper.paginate('/api/v1/apps', { params: { query: { limit: 5 } } })) {
      if (app.name === 'app-20') break;
    }
    expect(early.seen).toHaveLength(1);
  });
});

describe('429 and Retry-After', () => {
  let limited: TestApp;
  let limitedBase = '';
  let key = '';

  // 5 requests a minute from one address; making the tenant and its key spends 2 of them.
  beforeAll(async () => {
    limited = await startTestApp({ RATE_LIMIT_PER_MINUTE: '5' });
    limitedBase = await limited.app.listen({ port: 0, host: '127.0.0.1' });
    key = (await limited.tenant(['apps:read'])).key;
  });
  afterAll(() => limited.close());

  it('Retry-After reads as seconds or as an HTTP date', () => {
    expect(retryAfterMs('7')).toBe(7000);
    expect(retryAfterMs(new Date(Date.now() + 5000).toUTCString(), Date.now())).toBeGreaterThan(3000);
    expect(retryAfterMs(null)).toBeUndefined();
    expect(retryAfterMs('soon')).toBeUndefined();
  });

  it('a 429 whose Retry-After is longer than maxRetryDelayMs is thrown at once, with retryAfter', async () => {
    const { fetch, seen } = countingFetch();
    const ws = createWorkspaceClient({ baseUrl: limitedBase, apiKey: key, fetch, maxRetryDelayMs: 1000 });
    // Spend what is left of this minute's budget; the call that meets the limit throws at once.
    let error: WorkspaceApiError | undefined;
    let took = 0;
    for (let i = 0; i < 6 && !error; i++) {
      const started = Date.now();
      error = await ws.get('/api/v1/apps').then(
        () => undefined,
        (e: unknown) => (e instanceof WorkspaceApiError ? e : Promise.reject(e)),
      );
      took = Date.now() - started;
    }
    expect(took).toBeLessThan(1000);
    if (!error) throw new Error('no 429 within the budget');
    expect(error).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(error.retryAfter).toBeGreaterThan(1);
    expect(seen.at(-1)?.status).toBe(429);
    expect(seen.slice(0, -1).every((s) => s.status === 200)).toBe(true);
  });

  it('a 429 is retried after its Retry-After, and the call then succeeds', async () => {
    const { fetch, seen } = countingFetch();
    const retries: number[] = [];
    const ws = createWorkspaceClient({
      baseUrl: limitedBase,
      apiKey: key,
      fetch,
      maxRetries: 1,
      maxRetryDelayMs: 70_000,
      onRetry: ({ delayMs }) => retries.push(delayMs),
    });
    // The window of the previous test is still open: this call meets a 429 and waits it out.
    const list = await ws.get('/api/v1/apps');
    expect(list.object).toBe('list');
    expect(seen.map((s) => s.status)).toEqual([429, 200]);
    expect(retries).toHaveLength(1);
    const waited = (seen[1]?.at ?? 0) - (seen[0]?.at ?? 0);
    expect(waited).toBeGreaterThanOrEqual((retries[0] ?? 0) - 50);
    expect(retries[0]).toBeGreaterThan(1000);
  }, 120_000);
});
