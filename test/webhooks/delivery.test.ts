// Webhook delivery: events reach a local receiver (node:http on 127.0.0.1, with
// ALLOW_PRIVATE_TARGETS=true) signed per Standard Webhooks, every signature verified with the
// `standardwebhooks` library; retries with the same `webhook-id`, replays, secret rotation, a
// restart between a failed attempt and its retry, the delivery-time SSRF check, the 5-day
// disabling (time injected through the handler's clock), tenant isolation and scopes, and the
// deliveries' own job lane: receivers that hold their answers open hold up no other kind of job,
// and no other tenant's deliveries.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { registerWebhookDelivery, sweepWebhookLog } from '../../src/domain/webhooks/delivery.js';
import { WEBHOOK_DELIVERY_JOB } from '../../src/domain/webhooks/events.js';
import { createJobQueue, type JobQueue } from '../../src/jobs/queue.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { expectError, lockWaiters, QUEUED_BEHIND, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

type Received = { headers: http.IncomingHttpHeaders; body: string; path: string };
type Answer =
  | number
  | 'hang'
  | { status: number; location: string }
  | { status: number; bytes: number; chunked: boolean };

/** A local receiver answering from a script of statuses (then 200), recording every request. */
async function startReceiver() {
  const received: Received[] = [];
  const script: Answer[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), path: req.url ?? '' });
      // `/always-500` fails every time; other paths answer from the script, then 200.
      const answer = req.url?.includes('/always-500') ? 500 : (script.shift() ?? 200);
      if (answer === 'hang') return; // never answers: the attempt times out
      if (typeof answer === 'object' && 'bytes' in answer) {
        const body = 'x'.repeat(answer.bytes);
        res.writeHead(answer.status, answer.chunked ? {} : { 'content-length': answer.bytes }).end(body);
        return;
      }
      if (typeof answer === 'object') {
        res.writeHead(answer.status, { location: answer.location }).end();
        return;
      }
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer < 300 ? 'ok' : 'nope');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    script,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A receiver that keeps every request waiting, unanswered, until `answerAll()`. */
async function startHoldingReceiver() {
  const waiting: http.ServerResponse[] = [];
  let holding = true;
  let givenUp = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    if (!holding) return void res.writeHead(200).end('ok');
    waiting.push(res);
    // The caller closed the connection before an answer: its attempt timed out or was stopped.
    res.on('close', () => {
      if (!res.writableEnded) givenUp++;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/held`,
    waiting,
    givenUp: () => givenUp,
    answerAll() {
      holding = false;
      for (const res of waiting.splice(0)) res.writeHead(200).end('ok');
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await sleep(20);
  }
}

let t: TestApp;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const quiet = { info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const DAY = 86_400_000;
const ENV = { ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_BASE_MS: '250', WEBHOOK_TIMEOUT_MS: '500' };

beforeAll(async () => {
  t = await startTestApp(ENV);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
  await t.close();
});

/** Runs webhook jobs (waiting out the short test backoff) until the tenant has none queued. */
async function drain(
  tenantId: string,
  jobs: Pick<JobQueue, 'runUntilIdle'> = t.jobs,
  timeoutMs = 15_000,
  db = t.database.db,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await jobs.runUntilIdle();
    const { n } = await db
      .selectFrom('jobs')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('tenant_id', '=', tenantId)
      .where('kind', '=', WEBHOOK_DELIVERY_JOB)
      .where('status', 'in', ['queued', 'running'])
      .executeTakeFirstOrThrow();
    if (Number(n) === 0) return;
    if (Date.now() > deadline) throw new Error('webhook jobs did not drain');
    await sleep(20);
  }
}

const forTenant = (tenantId: string) => receiver.received.filter((r) => r.body.includes(tenantId));

async function createEndpoint(key: string, body: Record<string, unknown> = {}, app: TestApp = t) {
  const r = await app.call({
    method: 'POST',
    url: '/api/v1/webhook-endpoints',
    key,
    body: { url: receiver.url, events: ['*'], ...body },
  });
  expect(r.status, r.text).toBe(201);
  return r.body as { id: string; secret: string; url: string };
}

async function deliveries(key: string, endpointId: string, app: TestApp = t) {
  const r = await app.call({ url: `/api/v1/webhook-endpoints/${endpointId}/deliveries`, key });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

/** Waits until the endpoint's log holds `count` deliveries, every one succeeded. */
async function allDelivered(key: string, endpointId: string, count: number, app: TestApp, timeoutMs?: number) {
  await waitFor(async () => {
    const log = await deliveries(key, endpointId, app);
    return log.length === count && log.every((d: { status: string }) => d.status === 'succeeded');
  }, timeoutMs);
}

/** A user through the real users area, which emits `user.created`; the tenant id in the e-mail finds its deliveries. */
async function createUser(tenantId: string, key: string, name = 'Ada', app: TestApp = t) {
  const r = await app.call({
    method: 'POST',
    url: '/api/v1/users',
    key,
    body: { email: `${name.toLowerCase()}@${tenantId}.example.com`, name },
  });
  expect(r.status, r.text).toBe(201);
  return r.body;
}

const verify = (secret: string, r: Received) =>
  new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as Record<string, unknown>;

describe('webhook delivery', () => {
  it('an event reaches each enabled endpoint subscribed to it, signed per Standard Webhooks (verified by the standardwebhooks library)', async () => {
    const { tenantId, key } = await t.tenant();
    const all = await createEndpoint(key, { events: ['*'] });
    const users = await createEndpoint(key, { events: ['user.created'], url: `${receiver.url}/users` });
    const links = await createEndpoint(key, { events: ['task.link.created'], url: `${receiver.url}/links` });
    const user = await createUser(tenantId, key);
    await drain(tenantId);

    const got = forTenant(tenantId);
    expect(got.map((r) => r.path).sort()).toEqual(['/hooks', '/hooks/users']);
    const [toAll, toUsers] = [got.find((r) => r.path === '/hooks'), got.find((r) => r.path === '/hooks/users')];
    if (!toAll || !toUsers) throw new Error('missing delivery');
    const payload = verify(all.secret, toAll);
    expect(verify(users.secret, toUsers)).toEqual(payload);
    expect(() => verify(users.secret, toAll)).toThrow();
    expect(payload).toEqual({
      id: expect.any(String),
      type: 'user.created',
      created_at: expect.stringMatching(/Z$/),
      data: { user },
    });
    expect(toAll.headers['content-type']).toBe('application/json');
    expect(toAll.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(Math.abs(Number(toAll.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(toAll.headers['webhook-id']).not.toBe(toUsers.headers['webhook-id']);

    // The delivery log: webhook-id is the delivery id; one 2xx attempt.
    const [logged] = await deliveries(key, all.id);
    expect(logged).toMatchObject({
      id: toAll.headers['webhook-id'],
      object: 'webhook_delivery',
      endpoint_id: all.id,
      event_id: payload.id,
      event_type: 'user.created',
      status: 'succeeded',
      attempts: 1,
      last_status_code: 200,
      last_error: null,
      next_retry_at: null,
    });
    expect(logged.delivered_at).not.toBeNull();
    expect(await deliveries(key, links.id)).toEqual([]);
  });

  // PostgreSQL only: PGlite's one session runs the delete and the write one after the other.
  describe.runIf(usingPostgres)('an endpoint deleted meanwhile', () => {
    /** Runs `write` while another session deletes `endpointId`, committing once the write waits on it. */
    async function deletedDuring<T>(endpointId: string, write: () => Promise<T>): Promise<T> {
      return t.database.db.connection().execute(async (hold) => {
        await sql`begin`.execute(hold);
        await sql`delete from webhook_endpoints where id = ${endpointId}`.execute(hold);
        const written = write();
        // The write's event waits for the delete (whether it reads the endpoint, or its delivery's
        // foreign key checks it).
        expect(await lockWaiters(hold, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
        await sql`commit`.execute(hold);
        return written;
      });
    }

    it('while an event is written, is left out: the change the event reports is made (201), and the other endpoints get the event', async () => {
      const { tenantId, key } = await t.tenant();
      const gone = await createEndpoint(key, { url: `${receiver.url}/gone` });
      const kept = await createEndpoint(key, { url: `${receiver.url}/kept` });
      const r = await deletedDuring(gone.id, () =>
        t.call({
          method: 'POST',
          url: '/api/v1/users',
          key,
          body: { email: `late@${tenantId}.example.com`, name: 'Late' },
        }),
      );
      expect(r.status, r.text).toBe(201);
      await drain(tenantId);
      expect(forTenant(tenantId).map((got) => got.path)).toEqual(['/hooks/kept']);
      expect(await deliveries(key, kept.id)).toHaveLength(1);
    });

    it('while an attempt is being recorded: no deadlock; the delete answers 200 and the attempt ends quietly', async () => {
      const { tenantId, key } = await t.tenant();
      const endpoint = await createEndpoint(key, { url: `${receiver.url}/always-500` });
      await createUser(tenantId, key, 'Failing');
      let attempted: Promise<void> | undefined;
      const deleted = await t.database.db.connection().execute(async (hold) => {
        // The endpoint is held while its delete queues for it, then its failed attempt is recorded
        // behind the delete: the delete goes first, and takes the delivery the record wants.
        await sql`begin`.execute(hold);
        await sql`select 1 from webhook_endpoints where id = ${endpoint.id} for no key update`.execute(hold);
        const deleting = t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
        expect(await lockWaiters(hold, sql`pg_backend_pid() = any(pg_blocking_pids(pid))`)).toBe(1);
        attempted = t.jobs.runUntilIdle();
        expect(await lockWaiters(hold, QUEUED_BEHIND)).toBe(1);
        await sql`commit`.execute(hold);
        return deleting;
      });
      expect(deleted.status, deleted.text).toBe(200);
      await attempted;
      const jobs = await t.database.db
        .selectFrom('jobs')
        .select(['status', 'last_error'])
        .where('tenant_id', '=', tenantId)
        .where('kind', '=', WEBHOOK_DELIVERY_JOB)
        .execute();
      expect(jobs).toEqual([{ status: 'succeeded', last_error: null }]);
    });

    it('while an event is written outside a transaction (a sync’s outcome), is left out too: the event is kept and delivered to the others', async () => {
      const { tenantId, key } = await t.tenant();
      const gone = await createEndpoint(key, { url: `${receiver.url}/gone` });
      await createEndpoint(key, { url: `${receiver.url}/kept` });
      const user = await createUser(tenantId, key, 'Grace');
      const emitted = await deletedDuring(gone.id, () =>
        t.services.emitEvent(t.database.db, tenantId, 'user.permissions.changed', {
          user,
          added: ['tasks.view'],
          removed: [],
        }),
      );
      expect(emitted.deliveries).toBe(1);
      await drain(tenantId);
      const changed = forTenant(tenantId).filter((got) => got.body.includes('user.permissions.changed'));
      expect(changed.map((got) => got.path)).toEqual(['/hooks/kept']);
    });
  });

  it('an event is recorded exactly when the caller’s transaction commits: a rollback sends nothing', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const data = {
      user: {
        id: '0190a000-0000-7000-8000-000000000001',
        object: 'user' as const,
        email: `x@${tenantId}.example.com`,
        name: 'X',
        role: 'agent',
        permissions: [],
        created_at: new Date().toISOString(),
        updated_at: new Date().toISOString(),
      },
      added: ['tasks.view'],
      removed: [],
    };
    await expect(
      t.database.db.transaction().execute(async (trx) => {
        const emitted = await t.services.emitEvent(trx, tenantId, 'user.permissions.changed', data);
        expect(emitted.deliveries).toBe(1);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    await drain(tenantId);
    expect(forTenant(tenantId)).toEqual([]);
    expect(await deliveries(key, endpoint.id)).toEqual([]);

    await t.database.db.transaction().execute(async (trx) => {
      await t.services.emitEvent(trx, tenantId, 'user.permissions.changed', data);
    });
    await drain(tenantId);
    const [got] = forTenant(tenantId);
    if (!got) throw new Error('not delivered');
    expect(verify(endpoint.secret, got)).toMatchObject({ type: 'user.permissions.changed', data });
  });

  it('a failing receiver is retried with backoff: it fails twice and the third attempt lands with the same webhook-id', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    receiver.script.push(500, 503);
    await createUser(tenantId, key);

    await t.jobs.runUntilIdle();
    const [afterFirst] = await deliveries(key, endpoint.id);
    expect(afterFirst).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 500 });
    expect(afterFirst.last_error).toContain('500');
    expect(afterFirst.next_retry_at).not.toBeNull();

    await drain(tenantId);
    const got = forTenant(tenantId);
    expect(got).toHaveLength(3);
    const ids = new Set(got.map((r) => r.headers['webhook-id']));
    expect(ids.size).toBe(1);
    for (const r of got) expect(verify(endpoint.secret, r)).toMatchObject({ type: 'user.created' });
    expect(new Set(got.map((r) => r.body)).size).toBe(1);
    const [done] = await deliveries(key, endpoint.id);
    expect(done).toMatchObject({
      id: got[0]?.headers['webhook-id'],
      status: 'succeeded',
      attempts: 3,
      last_status_code: 200,
      last_error: null,
      next_retry_at: null,
    });
  });

  it('timeouts, refused connections and redirects count as failures and are retried; redirects are not followed', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    receiver.script.push('hang', { status: 302, location: `${receiver.url}/elsewhere` });
    await createUser(tenantId, key);

    await t.jobs.runUntilIdle();
    const [timedOut] = await deliveries(key, endpoint.id);
    expect(timedOut).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null });
    expect(timedOut.last_error).toMatch(/500 ms/);

    await sleep(300);
    await t.jobs.runUntilIdle();
    const [redirected] = await deliveries(key, endpoint.id);
    expect(redirected).toMatchObject({ status: 'pending', attempts: 2, last_status_code: 302 });
    expect(redirected.last_error).toContain('redirects are not followed');
    expect(forTenant(tenantId).map((r) => r.path)).toEqual(['/hooks', '/hooks']);

    await drain(tenantId);
    expect((await deliveries(key, endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempts: 3 });

    // A port nobody listens on: a network error, recorded without a status code.
    const closed = await createEndpoint(key, { url: 'http://127.0.0.1:9/hooks' });
    await createUser(tenantId, key, 'Grace');
    await t.jobs.runUntilIdle();
    const [refused] = await deliveries(key, closed.id);
    expect(refused).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null });
    expect(refused.last_error).toBeTruthy();
    await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${closed.id}`, key });
  });

  it('a 2xx with a long answer is a success: the first 64 KiB are read, the rest is not waited for', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    receiver.script.push(
      { status: 200, bytes: 100_000, chunked: false },
      { status: 200, bytes: 100_000, chunked: true },
    );
    await createUser(tenantId, key, 'Ada');
    await createUser(tenantId, key, 'Grace');
    await t.jobs.runUntilIdle();
    const list = await deliveries(key, endpoint.id);
    expect(
      list.map((d: { status: string; attempts: number; last_status_code: number }) => [
        d.status,
        d.attempts,
        d.last_status_code,
      ]),
    ).toEqual([
      ['succeeded', 1, 200],
      ['succeeded', 1, 200],
    ]);
  });

  it('replaying a delivery sends the same event again with the same webhook-id, freshly signed', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    await createUser(tenantId, key);
    await drain(tenantId);
    const [delivery] = await deliveries(key, endpoint.id);
    expect(delivery.status).toBe('succeeded');

    const replay = await t.call({ method: 'POST', url: `/api/v1/webhook-deliveries/${delivery.id}/replay`, key });
    expect(replay.status).toBe(202);
    expect(replay.body).toMatchObject({ id: delivery.id, status: 'pending', attempts: 1 });
    await drain(tenantId);

    const got = forTenant(tenantId);
    expect(got).toHaveLength(2);
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([delivery.id, delivery.id]);
    expect(got[1]?.body).toBe(got[0]?.body);
    for (const r of got) verify(endpoint.secret, r);
    const after = await t.call({ url: `/api/v1/webhook-deliveries/${delivery.id}`, key });
    expect(after.body).toMatchObject({ status: 'succeeded', attempts: 2, last_status_code: 200 });

    // A replay supersedes a retry still queued: one attempt, not two.
    receiver.script.push(500);
    const again = await t.call({ method: 'POST', url: `/api/v1/webhook-deliveries/${delivery.id}/replay`, key });
    expect(again.status).toBe(202);
    await t.jobs.runUntilIdle();
    expect((await t.call({ url: `/api/v1/webhook-deliveries/${delivery.id}`, key })).body.status).toBe('pending');
    await t.call({ method: 'POST', url: `/api/v1/webhook-deliveries/${delivery.id}/replay`, key });
    await drain(tenantId);
    await sleep(300);
    await drain(tenantId);
    expect(forTenant(tenantId)).toHaveLength(4);
    const final = await t.call({ url: `/api/v1/webhook-deliveries/${delivery.id}`, key });
    expect(final.body).toMatchObject({ status: 'succeeded', attempts: 4 });
  });

  it('replaying needs webhooks:write, finds only the tenant’s deliveries, and refuses a disabled endpoint (409)', async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const endpoint = await createEndpoint(a.key);
    await createUser(a.tenantId, a.key);
    await drain(a.tenantId);
    const [delivery] = await deliveries(a.key, endpoint.id);
    const replayUrl = `/api/v1/webhook-deliveries/${delivery.id}/replay`;

    const reader = await t.key(a.tenantId, ['webhooks:read']);
    expectError(await t.call({ method: 'POST', url: replayUrl, key: reader }), 403, 'insufficient_scope');
    expectError(await t.call({ method: 'POST', url: replayUrl, key: b.key }), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/webhook-deliveries/${delivery.id}`, key: b.key }), 404, 'not_found');

    await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key: a.key,
      body: { enabled: false },
    });
    expectError(await t.call({ method: 'POST', url: replayUrl, key: a.key }), 409, 'conflict');
    await drain(a.tenantId);
    expect(forTenant(a.tenantId)).toHaveLength(1);
    expect((await t.call({ url: `/api/v1/webhook-deliveries/${delivery.id}`, key: a.key })).body).toMatchObject({
      status: 'succeeded',
      attempts: 1,
    });
  });

  it('events of one tenant never reach another tenant’s endpoints', async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    const endpointA = await createEndpoint(a.key, { url: `${receiver.url}/a` });
    const endpointB = await createEndpoint(b.key, { url: `${receiver.url}/b` });
    await createUser(b.tenantId, b.key);
    await drain(b.tenantId);
    await drain(a.tenantId);
    expect(forTenant(b.tenantId).map((r) => r.path)).toEqual(['/hooks/b']);
    expect(receiver.received.filter((r) => r.path === '/hooks/a')).toEqual([]);
    expect(await deliveries(a.key, endpointA.id)).toEqual([]);
    expect(await deliveries(b.key, endpointB.id)).toHaveLength(1);
  });

  it('during a secret rotation each message carries two signatures, one per secret, each verifying on its own', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const rotated = await t.call({
      method: 'POST',
      url: `/api/v1/webhook-endpoints/${endpoint.id}/rotate-secret`,
      key,
    });
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.secret as string;
    await createUser(tenantId, key);
    await drain(tenantId);

    const [got] = forTenant(tenantId);
    if (!got) throw new Error('not delivered');
    const signatures = String(got.headers['webhook-signature']).split(' ');
    expect(signatures).toHaveLength(2);
    for (const s of signatures) expect(s).toMatch(/^v1,/);
    expect(verify(endpoint.secret, got)).toMatchObject({ type: 'user.created' });
    expect(verify(newSecret, got)).toMatchObject({ type: 'user.created' });
    const stranger = new Webhook(Buffer.from('x'.repeat(24)).toString('base64'));
    expect(() => stranger.verify(got.body, got.headers as Record<string, string>)).toThrow();
    // Each signature is its secret's own (computed by the library).
    const id = String(got.headers['webhook-id']);
    const at = new Date(Number(got.headers['webhook-timestamp']) * 1000);
    expect(signatures.sort()).toEqual(
      [new Webhook(newSecret).sign(id, at, got.body), new Webhook(endpoint.secret).sign(id, at, got.body)].sort(),
    );
  });

  it('after the 24 h overlap only the new secret signs (time injected through the handler clock)', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const rotated = await t.call({
      method: 'POST',
      url: `/api/v1/webhook-endpoints/${endpoint.id}/rotate-secret`,
      key,
    });
    const queue = createJobQueue({ db: t.database.db, log: quiet });
    registerWebhookDelivery(queue, {
      db: t.database.db,
      allowPrivateTargets: true,
      timeoutMs: 2000,
      now: () => new Date(Date.now() + DAY + 60_000),
    });
    await createUser(tenantId, key);
    await drain(tenantId, queue);
    const [got] = forTenant(tenantId);
    if (!got) throw new Error('not delivered');
    const signature = String(got.headers['webhook-signature']);
    expect(signature.split(' ')).toHaveLength(1);
    const at = new Date(Number(got.headers['webhook-timestamp']) * 1000);
    expect(signature).toBe(new Webhook(rotated.body.secret).sign(String(got.headers['webhook-id']), at, got.body));
  });

  it('a restart between a failed attempt and its retry loses no event: a new app on the same database delivers it', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    receiver.script.push(500);

    const first = await buildApp({ config: t.config, db: t.database.db });
    await first.app.ready();
    const created = await first.app.inject({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'x-api-key': key },
      payload: { email: `lin@${tenantId}.example.com`, name: 'Lin' },
    });
    expect(created.statusCode).toBe(201);
    await first.jobs.runUntilIdle();
    const [failed] = await deliveries(key, endpoint.id);
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 500 });
    await first.app.close();

    const second = await buildApp({ config: t.config, db: t.database.db });
    await second.app.ready();
    try {
      await drain(tenantId, second.jobs);
    } finally {
      await second.app.close();
    }
    const got = forTenant(tenantId);
    expect(got).toHaveLength(2);
    expect(got[1]?.headers['webhook-id']).toBe(failed.id);
    expect(got[0]?.headers['webhook-id']).toBe(failed.id);
    expect(verify(endpoint.secret, got[1] as Received)).toMatchObject({ type: 'user.created' });
    expect((await deliveries(key, endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('the SSRF guard runs again at delivery time: a private address is refused without ALLOW_PRIVATE_TARGETS', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    const strict = createJobQueue({ db: t.database.db, log: quiet });
    registerWebhookDelivery(strict, {
      db: t.database.db,
      allowPrivateTargets: false,
      timeoutMs: 2000,
      retry: { baseMs: 250 },
    });
    await createUser(tenantId, key);
    await strict.runUntilIdle();
    expect(forTenant(tenantId)).toEqual([]);
    const [refused] = await deliveries(key, endpoint.id);
    expect(refused).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null });
    expect(refused.last_error).toContain('not a public address');
    await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
    await drain(tenantId);
    expect(forTenant(tenantId)).toEqual([]);
  });

  it('an endpoint failing for 5 days straight is disabled with a disabled_reason; a success in between resets the count', async () => {
    const { tenantId, key } = await t.tenant();
    const failing = `${receiver.url}/always-500`;
    const endpoint = await createEndpoint(key, { url: failing });
    let clock = Date.now();
    const queue = createJobQueue({ db: t.database.db, log: quiet });
    registerWebhookDelivery(queue, {
      db: t.database.db,
      allowPrivateTargets: true,
      timeoutMs: 2000,
      retry: { baseMs: 250 },
      now: () => new Date(clock),
    });
    const failOnce = async (name: string) => {
      await createUser(tenantId, key, name);
      await queue.runUntilIdle();
    };

    await failOnce('Day0');
    clock += 4 * DAY;
    await failOnce('Day4');
    expect((await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key })).body).toMatchObject({
      enabled: true,
      disabled_reason: null,
    });
    clock += DAY + 60_000;
    await failOnce('Day5');
    const disabled = await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
    expect(disabled.body.enabled).toBe(false);
    expect(disabled.body.disabled_reason).toContain('5 days');
    const log = await deliveries(key, endpoint.id);
    expect(log[0]).toMatchObject({ event_type: 'user.created', status: 'failed', next_retry_at: null });
    // Retries still queued for the earlier events stop at the disabled endpoint.
    await sleep(300);
    await drain(tenantId, queue);
    const sent = forTenant(tenantId).length;
    expect((await deliveries(key, endpoint.id)).every((d: { status: string }) => d.status === 'failed')).toBe(true);

    // A disabled endpoint gets no new deliveries; enabling it again starts afresh.
    await createUser(tenantId, key, 'Day6');
    expect(await deliveries(key, endpoint.id)).toHaveLength(3);
    const enabled = await t.call({
      method: 'PATCH',
      url: `/api/v1/webhook-endpoints/${endpoint.id}`,
      key,
      body: { enabled: true },
    });
    expect(enabled.body).toMatchObject({ enabled: true, disabled_reason: null });
    await failOnce('Day7');
    expect((await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key })).body.enabled).toBe(true);
    expect(forTenant(tenantId).length).toBe(sent + 1);

    // Failing 3 days, one success, failing 3 more days: never 5 days in a row.
    clock += 3 * DAY;
    await failOnce('Day10');
    const patch = (url: string) =>
      t.call({ method: 'PATCH', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key, body: { url } });
    await patch(receiver.url);
    await createUser(tenantId, key, 'Day10ok');
    await queue.runUntilIdle();
    await patch(failing);
    clock += 3 * DAY;
    await failOnce('Day13');
    expect((await t.call({ url: `/api/v1/webhook-endpoints/${endpoint.id}`, key })).body.enabled).toBe(true);
    await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
  });

  it('a delivery stops being retried 24 h after its event: then it is failed', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key, { url: `${receiver.url}/always-500` });
    let clock = Date.now();
    const queue = createJobQueue({ db: t.database.db, log: quiet });
    registerWebhookDelivery(queue, {
      db: t.database.db,
      allowPrivateTargets: true,
      timeoutMs: 2000,
      retry: { baseMs: 250 },
      now: () => new Date(clock),
    });
    await createUser(tenantId, key);
    await queue.runUntilIdle();
    expect((await deliveries(key, endpoint.id))[0]).toMatchObject({ status: 'pending', attempts: 1 });
    clock += DAY;
    await sleep(300);
    await drain(tenantId, queue);
    const [given] = await deliveries(key, endpoint.id);
    expect(given).toMatchObject({ status: 'failed', attempts: 2, last_status_code: 500, next_retry_at: null });
    expect(forTenant(tenantId)).toHaveLength(2);
  });

  it('the areas emit their events: comments with mentions, links, users, permissions, knowledge gaps, source syncs', async () => {
    const { tenantId, key } = await t.tenant();
    const path = `/hooks/${tenantId}`;
    const endpoint = await createEndpoint(key, { url: `${receiver.url}/${tenantId}` });
    const call = async (method: 'POST' | 'DELETE', url: string, body?: unknown) => {
      const r = await t.call({ method, url, key, ...(body !== undefined ? { body } : {}) });
      expect(r.status, r.text).toBeLessThan(300);
      return r.body;
    };
    const grace = await createUser(tenantId, key, 'Grace');
    const task = await call('POST', '/api/v1/tasks', { title: 'Refund policy is unclear' });
    const comment = await call('POST', `/api/v1/tasks/${task.id}/comments`, {
      content: 'Can you look?',
      mention_ids: [grace.id],
    });
    const gap = await t.services.knowledgeGaps.recordGap(tenantId, { question: 'Do you ship to Mars?' });
    await t.services.knowledgeGaps.recordGap(tenantId, { question: 'do you ship to   mars?' }); // a repeat: no event
    const link = await call('POST', `/api/v1/tasks/${task.id}/links`, {
      target_type: 'knowledge_update_request',
      target_id: gap.id,
    });
    await call('POST', `/api/v1/tasks/${task.id}/links`, {
      target_type: 'knowledge_update_request',
      target_id: gap.id,
    });
    const granted = await call('POST', `/api/v1/users/${grace.id}/permissions`, { permissions: ['tasks.view'] });
    const permissionId = granted.permissions[0].id;
    await call('DELETE', `/api/v1/users/${grace.id}/permissions/${permissionId}`);
    // An upsert of an existing user that changes its permissions reports the difference.
    await call('POST', '/api/v1/users', { email: grace.email, permissions: ['analytics.view'] });
    const manual = await call('POST', '/api/v1/sources', { name: 'Handbook', source_type: 'manual' });
    await call('POST', `/api/v1/sources/${manual.id}/sync`);
    const site = await call('POST', '/api/v1/sources', {
      name: 'Site',
      source_type: 'website',
      domain: 'http://127.0.0.1:9/',
    });
    await call('POST', `/api/v1/sources/${site.id}/sync`);
    await drain(tenantId);

    const events = receiver.received
      .filter((r) => r.path === path)
      .map((r) => verify(endpoint.secret, r) as { type: string; data: Record<string, unknown> });
    expect(events.map((e) => e.type).sort()).toEqual(
      [
        'user.created',
        'task.comment.created',
        'knowledge_update_request.created',
        'task.link.created',
        'user.permissions.changed',
        'user.permissions.changed',
        'user.permissions.changed',
        'source.sync.completed',
        'source.sync.failed',
      ].sort(),
    );
    const byType = (type: string) => events.filter((e) => e.type === type);
    expect(byType('task.comment.created')[0]?.data).toEqual({
      task: { id: task.id, identifier: task.identifier, title: task.title },
      comment,
    });
    expect(comment.mentions).toEqual([{ id: grace.id, name: 'Grace', email: grace.email }]);
    expect(byType('task.link.created')[0]?.data).toEqual({
      task: { id: task.id, identifier: task.identifier, title: task.title },
      link,
    });
    expect(byType('knowledge_update_request.created')[0]?.data).toEqual({ knowledge_update_request: gap });
    expect(byType('user.permissions.changed').map((e) => [e.data.added, e.data.removed])).toEqual([
      [['tasks.view'], []],
      [[], ['tasks.view']],
      [['analytics.view'], []],
    ]);
    expect(byType('source.sync.completed')[0]?.data.source).toMatchObject({ id: manual.id, sync_status: 'synced' });
    const failed = byType('source.sync.failed')[0]?.data.source as { id: string; sync_error: string };
    expect(failed).toMatchObject({ id: site.id, sync_status: 'failed' });
    expect(failed.sync_error).toBeTruthy();
  });

  it('a comment is written once with its event when an endpoint subscribes, and alone when none does', async () => {
    const { tenantId, key } = await t.tenant();
    const comments = (taskId: string, body: unknown) =>
      t.call({ method: 'POST', url: `/api/v1/tasks/${taskId}/comments`, key, body });
    const grace = await createUser(tenantId, key, 'Grace');
    const task = (await t.call({ method: 'POST', url: '/api/v1/tasks', key, body: { title: 'Refunds' } })).body;
    // Endpoints that want other events, or are disabled, do not make a comment's write wait for them.
    const users = await createEndpoint(key, { url: `${receiver.url}/${tenantId}/users`, events: ['user.created'] });
    const later = await createEndpoint(key, {
      url: `${receiver.url}/${tenantId}/later`,
      events: ['task.comment.created'],
    });
    const setEnabled = async (enabled: boolean) => {
      const r = await t.call({ method: 'PATCH', url: `/api/v1/webhook-endpoints/${later.id}`, key, body: { enabled } });
      expect(r.status, r.text).toBe(200);
    };
    await setEnabled(false);
    const alone = await comments(task.id, { content: 'first', mention_ids: [grace.id] });
    expect(alone.status, alone.text).toBe(201);

    await setEnabled(true);
    const withEvent = await comments(task.identifier, { content: 'second', mention_ids: [grace.id] });
    expect(withEvent.status, withEvent.text).toBe(201);
    // A refused comment writes nothing and sends nothing, event or not.
    expectError(
      await comments(task.id, { content: 'third', author_id: '0190a0e0-0000-7000-8000-000000000000' }),
      422,
      'invalid_parameters',
      'author_id',
    );
    await drain(tenantId);

    expect(await deliveries(key, users.id)).toEqual([]);
    const sent = await deliveries(key, later.id);
    expect(sent).toHaveLength(1);
    const event = JSON.parse(forTenant(tenantId).find((r) => r.path.endsWith('/later'))?.body ?? 'null');
    expect(event).toMatchObject({ type: 'task.comment.created', data: { comment: withEvent.body } });
    const listed = await t.call({ url: `/api/v1/tasks/${task.id}/comments`, key });
    expect(listed.body.data).toEqual([withEvent.body, alone.body]);
    const notified = await t.call({ url: `/api/v1/users/${grace.id}/notifications`, key });
    expect(notified.body.data.map((n: { comment_id: string }) => n.comment_id)).toEqual([
      withEvent.body.id,
      alone.body.id,
    ]);
  });

  it('a turn that stops WAITING_CLIENT sends conversation.turn.waiting_client with the calls it waits for', async () => {
    const { tenantId, key } = await t.tenant();
    const path = `/hooks/${tenantId}`;
    const endpoint = await createEndpoint(key, {
      url: `${receiver.url}/${tenantId}`,
      events: ['conversation.turn.waiting_client'],
    });
    const sent = await t.call({
      method: 'POST',
      url: '/api/v1/messages',
      key,
      body: {
        content: 'please run get_cart for me',
        client_functions: [
          { name: 'get_cart', description: 'The cart', parameters: { type: 'object', properties: {} } },
        ],
        client_functions_mode: 'pause',
      },
    });
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body.status).toBe('WAITING_CLIENT');
    await drain(tenantId);
    const events = receiver.received
      .filter((r) => r.path === path)
      .map((r) => verify(endpoint.secret, r) as { type: string; data: Record<string, unknown> });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: 'conversation.turn.waiting_client',
      data: {
        conversation_id: sent.body.conversation_id,
        message_id: sent.body.id,
        function_calls: [{ call_id: sent.body.function_calls[0].call_id, name: 'get_cart' }],
      },
    });
  });

  it('a simulation run and a coverage evaluation that end send their completion events', async () => {
    const { tenantId, key } = await t.tenant();
    const path = `/hooks/${tenantId}`;
    const endpoint = await createEndpoint(key, {
      url: `${receiver.url}/${tenantId}`,
      events: ['simulation.run.completed', 'coverage.evaluation.completed'],
    });
    const call = async (url: string, body: unknown) => {
      const r = await t.call({ method: 'POST', url, key, body });
      expect(r.status, r.text).toBeLessThan(300);
      return r.body;
    };
    const dataset = await call('/api/v1/simulation/datasets', { name: 'Smoke' });
    await call(`/api/v1/simulation/datasets/${dataset.id}/test-cases`, {
      question: 'Do you sell moon rocks?',
      expected_type: 'no_answer',
    });
    const run = await call(`/api/v1/simulation/datasets/${dataset.id}/runs`, {});
    const referential = await call('/api/v1/coverage/referentials', { name: 'FAQ' });
    await call(`/api/v1/coverage/referentials/${referential.id}/questions`, {
      questions: [{ question: 'How do I reset my password?', domain: 'account' }],
    });
    const evaluation = await call('/api/v1/coverage/evaluations', { referential_id: referential.id });
    await drain(tenantId);
    const events = receiver.received
      .filter((r) => r.path === path)
      .map((r) => verify(endpoint.secret, r) as { type: string; data: Record<string, { id: string; status: string }> });
    const byType = new Map(events.map((e) => [e.type, e.data]));
    expect(events).toHaveLength(2);
    expect(byType.get('simulation.run.completed')?.run).toMatchObject({ id: run.id, status: 'completed' });
    expect(byType.get('coverage.evaluation.completed')?.evaluation).toMatchObject({
      id: evaluation.id,
      status: 'completed',
    });
  });

  it('the log sweep removes finished deliveries past retention with their events, never a pending one', async () => {
    const { tenantId, key } = await t.tenant();
    const done = await createEndpoint(key, { url: `${receiver.url}/done` });
    const failing = await createEndpoint(key, { url: `${receiver.url}/always-500` });
    await createUser(tenantId, key);
    await t.jobs.runUntilIdle();
    expect((await deliveries(key, done.id))[0].status).toBe('succeeded');
    const [pending] = await deliveries(key, failing.id);
    expect(pending.status).toBe('pending');

    await sweepWebhookLog(t.database.db, 60_000); // nothing is a minute old yet
    expect(await deliveries(key, done.id)).toHaveLength(1);
    await sleep(5);
    await sweepWebhookLog(t.database.db, 0);
    expect(await deliveries(key, done.id)).toEqual([]);
    expect(await deliveries(key, failing.id)).toHaveLength(1);
    const event = await t.database.db
      .selectFrom('webhook_events')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', pending.event_id)
      .executeTakeFirst();
    expect(event).toBeDefined(); // still needed by the pending delivery
    await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${failing.id}`, key });
  });

  it('receivers that hold their answers open take only the delivery lane’s slots: another tenant’s sync still runs', async () => {
    const held = await startHoldingReceiver();
    // Two delivery slots, as many as the other kinds have, both open to one tenant, and attempts
    // that outlast the test.
    const app = await startTestApp(
      {
        ...ENV,
        WEBHOOK_TIMEOUT_MS: '60000',
        WEBHOOK_CONCURRENCY: '2',
        WEBHOOK_TENANT_CONCURRENCY: '2',
        JOB_POLL_MS: '20',
      },
      { startJobs: true },
    );
    try {
      const slow = await app.tenant();
      const endpoint = await createEndpoint(slow.key, { url: held.url }, app);
      for (const name of ['Ada', 'Bea', 'Cyd']) await createUser(slow.tenantId, slow.key, name, app);
      // Both slots wait on the receiver; the third delivery waits for a slot.
      await waitFor(() => held.waiting.length === 2);

      const other = await app.tenant();
      const source = await app.call({
        method: 'POST',
        url: '/api/v1/sources',
        key: other.key,
        body: { name: 'Handbook', source_type: 'manual' },
      });
      expect(source.status, source.text).toBe(201);
      const sync = await app.call({ method: 'POST', url: `/api/v1/sources/${source.body.id}/sync`, key: other.key });
      expect(sync.status, sync.text).toBe(202);
      await waitFor(async () => {
        const r = await app.call({ url: `/api/v1/sources/${source.body.id}`, key: other.key });
        return r.body.sync_status === 'synced';
      });
      // The sync ran while the deliveries still waited: none answered or given up, none more begun.
      expect(held.waiting).toHaveLength(2);
      expect(held.givenUp()).toBe(0);

      held.answerAll();
      await allDelivered(slow.key, endpoint.id, 3, app);
    } finally {
      held.answerAll();
      await app.close();
      await held.close();
    }
  });

  it('a tenant whose receiver hangs holds at most half the delivery lane: another tenant’s delivery lands at once', async () => {
    const held = await startHoldingReceiver();
    // The default lane of 8 (WEBHOOK_CONCURRENCY) and its default share per tenant, 4; attempts
    // that outlast the test.
    const app = await startTestApp({ ...ENV, WEBHOOK_TIMEOUT_MS: '60000', JOB_POLL_MS: '20' }, { startJobs: true });
    try {
      const slow = await app.tenant();
      const slowEndpoint = await createEndpoint(slow.key, { url: held.url }, app);
      const names = ['Ada', 'Bea', 'Cyd', 'Dee', 'Eve', 'Fay', 'Gus', 'Hal', 'Ivy', 'Jo'];
      for (const name of names) await createUser(slow.tenantId, slow.key, name, app);
      // Ten deliveries due, eight slots: the tenant's four hang, the other four slots stay free.
      await waitFor(() => held.waiting.length >= 4);
      await sleep(200);

      const other = await app.tenant();
      const endpoint = await createEndpoint(other.key, {}, app);
      await createUser(other.tenantId, other.key, 'Kim', app);
      // Well before the hanging attempts' 60 s timeout: it did not wait for a slot.
      await allDelivered(other.key, endpoint.id, 1, app, 5_000);
      expect(forTenant(other.tenantId)).toHaveLength(1);
      // Meanwhile the hanging tenant never had more than its four attempts out.
      expect(held.waiting).toHaveLength(4);
      expect(held.givenUp()).toBe(0);

      held.answerAll();
      await allDelivered(slow.key, slowEndpoint.id, names.length, app);
    } finally {
      held.answerAll();
      await app.close();
      await held.close();
    }
  });

  it('with several tenants’ deliveries due, one whose receiver hangs gets half its cap before another’s turn (WEBHOOK_TENANT_CONCURRENCY / 2)', async () => {
    const held = await startHoldingReceiver();
    // A lane of 4, all of them open to one tenant (its cap), and so its share is 2.
    const app = await startTestApp({
      ...ENV,
      WEBHOOK_TIMEOUT_MS: '60000',
      WEBHOOK_CONCURRENCY: '4',
      WEBHOOK_TENANT_CONCURRENCY: '4',
      JOB_POLL_MS: '20',
    });
    try {
      // Queued before the workers start: the slow tenant's four deliveries are the oldest due.
      const slow = await app.tenant();
      const slowEndpoint = await createEndpoint(slow.key, { url: held.url }, app);
      const names = ['Ada', 'Bea', 'Cyd', 'Dee'];
      for (const name of names) await createUser(slow.tenantId, slow.key, name, app);
      const other = await app.tenant();
      const endpoint = await createEndpoint(other.key, {}, app);
      await createUser(other.tenantId, other.key, 'Kim', app);
      app.jobs.start();
      // Past its share, the slow tenant's next attempt waits while the other's is due: the other
      // tenant's lands well before the hanging attempts' 60 s timeout (with all four slots open
      // to the oldest jobs, it would have waited for one of them).
      await allDelivered(other.key, endpoint.id, 1, app, 5_000);
      // Then the idle slot goes to the slow tenant again: all four of its attempts are out.
      await waitFor(() => held.waiting.length === 4);
      expect(held.givenUp()).toBe(0);
      held.answerAll();
      await allDelivered(slow.key, slowEndpoint.id, names.length, app);
    } finally {
      held.answerAll();
      await app.close();
      await held.close();
    }
  });

  it('deleting an endpoint drops its queued attempts', async () => {
    const { tenantId, key } = await t.tenant();
    const endpoint = await createEndpoint(key);
    await createUser(tenantId, key);
    await t.call({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}`, key });
    await drain(tenantId);
    expect(forTenant(tenantId)).toEqual([]);
  });
});

describe('signing secrets sealed at rest (SECRETS_KEY)', () => {
  const KEY = randomBytes(32);
  let sealed: TestApp;
  beforeAll(async () => {
    // A database of its own: sealing at start seals every endpoint stored in it.
    sealed = await startTestApp({ ...ENV, SECRETS_KEY: KEY.toString('base64') });
  });
  afterAll(() => sealed.close());

  const stored = (id: string) =>
    sealed.database.db
      .selectFrom('webhook_endpoints')
      .select(['secret', 'previous_secret'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  const rotate = async (app: TestApp, key: string, id: string) => {
    const r = await app.call({ method: 'POST', url: `/api/v1/webhook-endpoints/${id}/rotate-secret`, key });
    expect(r.status, r.text).toBe(200);
    return r.body.secret as string;
  };
  /** Delivers the tenant's next event (by `jobs`' workers) and verifies it with each secret given. */
  async function deliveredUnder(
    tenantId: string,
    key: string,
    secrets: string[],
    name: string,
    jobs: Pick<JobQueue, 'runUntilIdle'> = sealed.jobs,
  ) {
    await createUser(tenantId, key, name, sealed);
    await drain(tenantId, jobs, 15_000, sealed.database.db);
    const got = forTenant(tenantId).at(-1);
    if (!got) throw new Error('not delivered');
    expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(secrets.length);
    for (const secret of secrets) expect(verify(secret, got)).toMatchObject({ type: 'user.created' });
  }

  it('a secret is stored sealed, never as issued, and every message still verifies, through a rotation', async () => {
    const { tenantId, key } = await sealed.tenant();
    const endpoint = await createEndpoint(key, {}, sealed);
    const first = await stored(endpoint.id);
    expect(first.secret).toMatch(/^sealed1\./);
    expect(first.secret).not.toContain(endpoint.secret.slice('whsec_'.length));
    await deliveredUnder(tenantId, key, [endpoint.secret], 'Ada');

    // A UUID in either case names the endpoint; the secret is bound to it all the same.
    const next = await rotate(sealed, key, endpoint.id.toUpperCase());
    const second = await stored(endpoint.id);
    expect(second.previous_secret).toBe(first.secret);
    expect(second.secret).toMatch(/^sealed1\./);
    expect(second.secret).not.toContain(next.slice('whsec_'.length));
    await deliveredUnder(tenantId, key, [next, endpoint.secret], 'Bo');
  });

  it('an answer showing a secret, kept to replay under Idempotency-Key, is sealed as the secret is (REST and MCP)', async () => {
    const { tenantId, key } = await sealed.tenant();
    const kept = async (idempotencyKey: string) =>
      (
        await sealed.database.db
          .selectFrom('idempotency_keys')
          .select('response_body')
          .where('tenant_id', '=', tenantId)
          .where('key', '=', idempotencyKey)
          .executeTakeFirstOrThrow()
      ).response_body as string;
    const create = () =>
      sealed.call({
        method: 'POST',
        url: '/api/v1/webhook-endpoints',
        key,
        body: { url: receiver.url, events: ['*'] },
        headers: { 'idempotency-key': 'create-sealed' },
      });
    const first = await create();
    expect(first.status).toBe(201);
    const replay = await create();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(first.body);
    const secret = first.body.secret as string;
    expect(await kept('create-sealed')).toMatch(/^sealed1\./);
    expect(await kept('create-sealed')).not.toContain(secret.slice('whsec_'.length));

    const rotate = () =>
      sealed.call({
        method: 'POST',
        url: '/api/v1/mcp',
        key,
        headers: { accept: 'application/json, text/event-stream', 'idempotency-key': 'rotate-sealed' },
        body: {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'rotate_webhook_secret', arguments: { endpoint_id: first.body.id } },
        },
      });
    const rotated = await rotate();
    const next = rotated.body.result.structuredContent.secret as string;
    expect(next).toMatch(/^whsec_/);
    expect((await rotate()).body).toEqual(rotated.body);
    expect(await kept('rotate-sealed')).toMatch(/^sealed1\./);
    expect(await kept('rotate-sealed')).not.toContain(next.slice('whsec_'.length));
  });

  it('a change of key: with the old one as SECRETS_KEY_PREVIOUS every message verifies, and start-up moves the secrets under the new one', async () => {
    const { tenantId, key } = await sealed.tenant();
    const endpoint = await createEndpoint(key, {}, sealed);
    const next = await rotate(sealed, key, endpoint.id);
    const underOld = await stored(endpoint.id);

    const NEW = randomBytes(32);
    const changed = await buildApp({
      config: { ...sealed.config, secretsKey: NEW, secretsKeyPrevious: KEY },
      db: sealed.database.db,
    });
    const alone = await buildApp({ config: { ...sealed.config, secretsKey: NEW }, db: sealed.database.db });
    await Promise.all([changed.app.ready(), alone.app.ready()]);
    try {
      // Before the secrets are moved, the old key opens them.
      await deliveredUnder(tenantId, key, [next, endpoint.secret], 'Fay', changed.jobs);

      expect(await changed.services.webhooks.sealStoredSecrets()).toBeGreaterThanOrEqual(1);
      expect(await changed.services.webhooks.sealStoredSecrets()).toBe(0);
      const underNew = await stored(endpoint.id);
      expect(underNew.secret).not.toBe(underOld.secret);
      expect(underNew.previous_secret).not.toBe(underOld.previous_secret);
      const opened = createSecretBox(NEW);
      expect(opened.open(underNew.secret, endpoint.id)).toBe(next);
      expect(opened.open(underNew.previous_secret as string, endpoint.id)).toBe(endpoint.secret);
      // The old key can now be dropped: the new one alone signs with both secrets.
      await deliveredUnder(tenantId, key, [next, endpoint.secret], 'Gus', alone.jobs);
    } finally {
      await Promise.all([changed.app.close(), alone.app.close()]);
    }
  });

  it('secrets stored before the key are sealed at start; under another key nothing is sent, and the log says why', async () => {
    const { tenantId, key } = await sealed.tenant();
    // Stored by a server without SECRETS_KEY, on the same database.
    const plain = await buildApp({ config: { ...sealed.config, secretsKey: undefined }, db: sealed.database.db });
    await plain.app.ready();
    const call = async (url: string, payload?: object) => {
      const r = await plain.app.inject({
        method: 'POST',
        url,
        headers: { 'x-api-key': key },
        ...(payload ? { payload } : {}),
      });
      expect(r.statusCode, r.body).toBeLessThan(300);
      return JSON.parse(r.body) as { id: string; secret: string };
    };
    const endpoint = await call('/api/v1/webhook-endpoints', { url: receiver.url, events: ['*'] });
    const { secret: next } = await call(`/api/v1/webhook-endpoints/${endpoint.id}/rotate-secret`);
    await plain.app.close();
    expect(await stored(endpoint.id)).toEqual({ secret: next, previous_secret: endpoint.secret });

    expect(await sealed.services.webhooks.sealStoredSecrets()).toBe(1);
    expect(await sealed.services.webhooks.sealStoredSecrets()).toBe(0);
    const now = await stored(endpoint.id);
    expect(now.secret).toMatch(/^sealed1\./);
    expect(now.previous_secret).toMatch(/^sealed1\./);
    await deliveredUnder(tenantId, key, [next, endpoint.secret], 'Cy');

    // A server with another key cannot open them: the attempt fails, with its reason, unsent.
    // Rotated there, the new secret signs alone at once: the previous one, sealed under the first
    // key, does not open and is left out.
    const other = await buildApp({
      config: { ...sealed.config, secretsKey: randomBytes(32) },
      db: sealed.database.db,
    });
    await other.app.ready();
    const before = forTenant(tenantId).length;
    try {
      await createUser(tenantId, key, 'Di', sealed);
      await other.jobs.runUntilIdle();
      expect(forTenant(tenantId)).toHaveLength(before);
      const [failed] = await deliveries(key, endpoint.id, sealed);
      expect(failed).toMatchObject({
        status: 'pending',
        attempts: 1,
        last_status_code: null,
        last_error:
          'Not sent: the sealed secret does not open with SECRETS_KEY (another key sealed it, or it was altered).',
      });
      const rotated = await other.app.inject({
        method: 'POST',
        url: `/api/v1/webhook-endpoints/${endpoint.id}/rotate-secret`,
        headers: { 'x-api-key': key },
      });
      const renewed = JSON.parse(rotated.body).secret as string;
      await createUser(tenantId, key, 'Ed', sealed);
      await drain(tenantId, other.jobs, 15_000, sealed.database.db);
      const got = forTenant(tenantId).at(-1) as Received;
      expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(1);
      expect(verify(renewed, got)).toMatchObject({ type: 'user.created' });
    } finally {
      await other.app.close();
    }
  });
});
