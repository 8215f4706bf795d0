// Idempotency-Key while a request runs (src/http/idempotency.ts): its key is leased, the lease
// renewed for as long as it runs, so a repeat waits (409) however long the first takes; a
// reservation whose server stopped mid-request runs out and the repeat runs again, as after a 5xx.
// A Fastify app of its own with a route that runs until the test lets it finish, on the database
// of a test app (its tenants), with a lease of three seconds.
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../src/http/errors.js';
import { registerIdempotency } from '../../src/http/idempotency.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import type { AuthContext } from '../../src/operations/context.js';
import { startTestApp, type TestApp } from '../helpers.js';

const LEASE_SECONDS = 3;
let t: TestApp;
let app: FastifyInstance;
let tenantId: string;
let runs = 0;
let release: () => void = () => {};

beforeAll(async () => {
  t = await startTestApp();
  ({ tenantId } = await t.tenant());
  app = Fastify();
  registerErrorHandling(app, undefined);
  app.decorateRequest('auth', null);
  app.addHook('onRequest', async (request) => {
    request.auth = { tenantId, keyId: 'k', keyName: 'test', scopes: [] } satisfies AuthContext;
  });
  registerIdempotency(
    app,
    t.database.db,
    createSecretBox(undefined),
    (error) => {
      throw error;
    },
    { leaseSeconds: LEASE_SECONDS },
  );
  app.post('/work', async () => {
    runs += 1;
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    return { run: runs };
  });
  app.post('/fail', async () => {
    runs += 1;
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    throw new Error('failed after its lease was taken over');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await app.close();
  await t.close();
});

const work = (key: string, url = '/work') =>
  app.inject({
    method: 'POST',
    url,
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    payload: {},
  });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Idempotency-Key while the first request runs', () => {
  it('a repeat answers 409 for as long as the first runs, past the lease, then replays its answer', async () => {
    const before = runs;
    const first = work('long');
    while (runs === before) await sleep(20);
    // Well past the lease: renewed all along, the reservation still holds.
    await sleep(LEASE_SECONDS * 2500);
    const repeat = await work('long');
    expect(repeat.statusCode, repeat.body).toBe(409);
    expect(repeat.json().error).toMatchObject({
      code: 'conflict',
      message: expect.stringMatching(/still being processed/),
    });
    expect(runs).toBe(before + 1);
    release();
    expect((await first).statusCode).toBe(200);
    const replay = await work('long');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual({ run: before + 1 });
  });

  it('a client that hangs up leaves its request running: the lease is still renewed, a repeat still waits', async () => {
    const before = runs;
    const hangUp = new AbortController();
    const { port } = app.server.address() as AddressInfo;
    const first = fetch(`http://127.0.0.1:${port}/work`, {
      method: 'POST',
      headers: { 'idempotency-key': 'hung-up', 'content-type': 'application/json' },
      body: '{}',
      signal: hangUp.signal,
    }).catch(() => 'hung up');
    while (runs === before) await sleep(20);
    hangUp.abort();
    expect(await first).toBe('hung up');
    await sleep(LEASE_SECONDS * 2500);
    const repeat = await work('hung-up');
    expect(repeat.statusCode, repeat.body).toBe(409);
    expect(runs).toBe(before + 1);
    release();
  });

  it('a reservation whose server stopped mid-request runs out: once its lease has passed, the repeat runs', async () => {
    // What a server killed while running a request leaves: a reservation without an answer.
    const reserve = (key: string, age: number) =>
      sql`insert into idempotency_keys (tenant_id, key, request_hash, created_at)
          values (${tenantId}, ${key}, 'from-a-stopped-server', now() - make_interval(secs => ${age}))`.execute(
        t.database.db,
      );
    await reserve('stale', LEASE_SECONDS + 1);
    // Reserved an hour ahead: however slow this machine, its lease is not over when asked.
    await reserve('fresh', -3600);
    expect((await work('fresh')).statusCode).toBe(409);
    const before = runs;
    const retried = work('stale');
    while (runs === before) await sleep(20);
    release();
    expect((await retried).json()).toEqual({ run: before + 1 });
  });

  // What a repeat leaves on a key it took over once the first request's lease ran out (the first
  // request's renewals failed, say while the database was unreachable): its own reservation, then
  // its answer. The first request, still running, must leave both alone.
  const takeOver = (key: string) =>
    sql`update idempotency_keys
        set lease_token = gen_random_uuid(), created_at = now(), status_code = 201,
            content_type = 'application/json; charset=utf-8', response_body = '{"run":"the repeat"}'
        where tenant_id = ${tenantId} and key = ${key}`.execute(t.database.db);

  for (const [outcome, url] of [
    ['answers', '/work'],
    ['fails (5xx)', '/fail'],
  ] as const) {
    it(`a request that lost its lease and then ${outcome} leaves the key with the repeat that took it over`, async () => {
      const key = `taken-over-${url}`;
      const before = runs;
      const first = work(key, url);
      while (runs === before) await sleep(20);
      await takeOver(key);
      release();
      expect((await first).statusCode).toBe(url === '/work' ? 200 : 500);
      // Let the renewal timer fire once more too: it must not touch the repeat's record either.
      await sleep(LEASE_SECONDS * 400);
      const replay = await work(key, url);
      expect(replay.statusCode, replay.body).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json()).toEqual({ run: 'the repeat' });
      expect(runs).toBe(before + 1);
    });
  }
});
