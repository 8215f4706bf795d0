// The durable job queue: jobs in the database, claimed with FOR UPDATE SKIP LOCKED under a lease,
// deduplicated by key, retried with exponential backoff, taken over when their worker dies,
// never run twice by several workers on one database, and run in lanes that never wait on each other,
// where one tenant's jobs take at most the lane's per-tenant cap of its slots, or past its share
// only while no other tenant's job is due.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/client.js';
import { createJobQueue, type JobQueueOptions } from '../../src/jobs/queue.js';
import { startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;
let tenantId: string;

const quiet = { info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let kindSeq = 0;
const uniqueKind = (name: string) => `${name}.${++kindSeq}`;
const queue = (options: Partial<JobQueueOptions> = {}) => createJobQueue({ db: t.database.db, log: quiet, ...options });
const jobRow = (id: string) =>
  t.database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await sleep(20);
  }
}

/** Registers `kind` with jobs that run until released; `most()` is the most of `tenantId`'s at once. */
function holdingKind(q: ReturnType<typeof queue>, kind: string) {
  const held: { tenantId: string; release: () => void }[] = [];
  let most = 0;
  q.register(
    kind,
    (job) =>
      new Promise<void>((resolve) => {
        held.push({ tenantId: job.tenantId, release: resolve });
        most = Math.max(most, held.filter((h) => h.tenantId === tenantId).length);
      }),
  );
  return {
    held,
    most: () => most,
    /** Releases every job as it starts, until all of `ids` have succeeded. */
    drain: (ids: string[]) =>
      waitFor(async () => {
        for (const h of held.splice(0)) h.release();
        const rows = await Promise.all(ids.map(jobRow));
        return rows.every((row) => row.status === 'succeeded');
      }),
  };
}

beforeAll(async () => {
  t = await startTestApp();
  ({ tenantId } = await t.tenant());
});
afterAll(() => t.close());

describe('job queue', () => {
  it('stores a job in the database and runs it once: status succeeded, attempts 1', async () => {
    const q = queue();
    const kind = uniqueKind('hello');
    const seen: unknown[] = [];
    q.register(kind, async (job) => {
      seen.push({ tenant: job.tenantId, payload: job.payload, attempts: job.attempts });
    });
    const { id, deduplicated } = await q.enqueue(t.database.db, { kind, tenantId, payload: { n: 1 } });
    expect(deduplicated).toBe(false);
    expect((await jobRow(id)).status).toBe('queued');
    await q.runUntilIdle();
    expect(seen).toEqual([{ tenant: tenantId, payload: { n: 1 }, attempts: 1 }]);
    const row = await jobRow(id);
    expect(row).toMatchObject({ status: 'succeeded', attempts: 1, last_error: null, locked_until: null });
    expect(row.finished_at).toBeInstanceOf(Date);
    await q.runUntilIdle();
    expect(seen).toHaveLength(1);
  });

  it('a dedupe key admits one queued-or-running job; a new one once it finished', async () => {
    const q = queue();
    const kind = uniqueKind('dedupe');
    q.register(kind, async () => {});
    const first = await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'k' });
    const again = await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'k' });
    expect(again).toEqual({ id: first.id, deduplicated: true });
    const claimed = await q.claim();
    expect(claimed?.job.id).toBe(first.id);
    expect(await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'k' })).toEqual({
      id: first.id,
      deduplicated: true,
    });
    // The key is per tenant.
    const other = await t.tenant();
    expect((await q.enqueue(t.database.db, { kind, tenantId: other.tenantId, dedupeKey: 'k' })).deduplicated).toBe(
      false,
    );
    if (!claimed) throw new Error('nothing claimed');
    await q.run(claimed);
    await q.runUntilIdle();
    const next = await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'k' });
    expect(next.deduplicated).toBe(false);
    expect(next.id).not.toBe(first.id);
    await q.runUntilIdle();
  });

  it('a follow-up asked of a running job runs it once more after it ends, never alongside it; a queued one is joined', async () => {
    const q = queue();
    const kind = uniqueKind('follow-up');
    let runs = 0;
    q.register(kind, async () => {
      runs++;
    });
    const first = await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'f' });
    // Queued: joined, nothing more to run.
    expect(await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'f', followUp: true })).toEqual({
      id: first.id,
      deduplicated: true,
    });
    const claimed = await q.claim();
    if (!claimed) throw new Error('nothing claimed');
    for (let i = 0; i < 2; i++) {
      expect(await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'f', followUp: true })).toEqual({
        id: first.id,
        deduplicated: true,
        followUp: true,
      });
    }
    expect(await q.claim()).toBeUndefined(); // the follow-up is not a second job
    await q.run(claimed);
    expect(runs).toBe(1);
    expect(await jobRow(first.id)).toMatchObject({
      status: 'queued',
      attempts: 0,
      follow_up: false,
      finished_at: null,
    });
    await q.runUntilIdle();
    expect(runs).toBe(2); // asked twice, run once more
    expect(await jobRow(first.id)).toMatchObject({ status: 'succeeded', attempts: 1, follow_up: false });
  });

  it('a follow-up asked of a running job on its last attempt runs even if that attempt fails: not failed for good', async () => {
    const q = queue();
    const kind = uniqueKind('follow-up-failed');
    let runs = 0;
    const failures: string[] = [];
    q.register(
      kind,
      async () => {
        runs++;
        if (runs === 1) throw new Error('the last attempt fails');
      },
      { onFailed: async (_job, error) => void failures.push(error) },
    );
    const first = await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'ff', maxAttempts: 1 });
    const claimed = await q.claim();
    if (!claimed) throw new Error('nothing claimed');
    expect(await q.enqueue(t.database.db, { kind, tenantId, dedupeKey: 'ff', followUp: true })).toMatchObject({
      followUp: true,
    });
    await q.run(claimed);
    expect(await jobRow(first.id)).toMatchObject({ status: 'queued', attempts: 0, follow_up: false });
    expect(failures).toEqual([]);
    await q.runUntilIdle();
    expect(runs).toBe(2);
    expect(await jobRow(first.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('enqueueing joins the caller’s transaction: a rolled-back enqueue leaves no job', async () => {
    const q = queue();
    const kind = uniqueKind('trx');
    q.register(kind, async () => {});
    let id = '';
    await expect(
      t.database.db.transaction().execute(async (trx) => {
        id = (await q.enqueue(trx, { kind, tenantId })).id;
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    const found = await t.database.db.selectFrom('jobs').select('id').where('id', '=', id).executeTakeFirst();
    expect(found).toBeUndefined();
  });

  it('retries a failing job with exponential backoff, then succeeds', async () => {
    const q = queue({ backoffMs: 150 });
    const kind = uniqueKind('flaky');
    let calls = 0;
    q.register(kind, async () => {
      calls++;
      if (calls < 3) throw new Error(`boom ${calls}`);
    });
    const { id } = await q.enqueue(t.database.db, { kind, tenantId, maxAttempts: 5 });
    await q.runUntilIdle();
    let row = await jobRow(id);
    expect(row).toMatchObject({ status: 'queued', attempts: 1, last_error: 'boom 1' });
    const delay1 = row.run_at.getTime() - row.updated_at.getTime();
    expect(delay1).toBeGreaterThanOrEqual(140);
    await q.runUntilIdle(); // not due yet
    expect(calls).toBe(1);
    await sleep(200);
    await q.runUntilIdle();
    row = await jobRow(id);
    expect(row).toMatchObject({ status: 'queued', attempts: 2, last_error: 'boom 2' });
    const delay2 = row.run_at.getTime() - row.updated_at.getTime();
    expect(delay2).toBeGreaterThanOrEqual(290); // doubled
    await sleep(350);
    await q.runUntilIdle();
    row = await jobRow(id);
    expect(row).toMatchObject({ status: 'succeeded', attempts: 3, last_error: null });
    expect(calls).toBe(3);
  });

  it('gives up after max_attempts: status failed with last_error, onFailed called once', async () => {
    const q = queue({ backoffMs: 0 });
    const kind = uniqueKind('broken');
    let calls = 0;
    const failures: string[] = [];
    q.register(
      kind,
      async () => {
        calls++;
        throw new Error('always broken');
      },
      { onFailed: async (_job, error) => void failures.push(error) },
    );
    const { id } = await q.enqueue(t.database.db, { kind, tenantId, maxAttempts: 2 });
    await q.runUntilIdle();
    expect(calls).toBe(2);
    expect(await jobRow(id)).toMatchObject({ status: 'failed', attempts: 2, last_error: 'always broken' });
    expect(failures).toEqual(['always broken']);
  });

  it('a job whose worker died mid-job is taken over after its lease and completes exactly once', async () => {
    const kind = uniqueKind('crash');
    const runs: string[] = [];
    const handler = (worker: string) => async () => {
      runs.push(worker);
    };
    const dying = queue({ leaseMs: 300 });
    dying.register(kind, handler('dying'));
    const survivor = queue({ leaseMs: 300 });
    survivor.register(kind, handler('survivor'));
    const { id } = await dying.enqueue(t.database.db, { kind, tenantId });

    // The first worker claims the job and then "dies": it never runs, renews or finishes it.
    const lost = await dying.claim();
    expect(lost?.job.id).toBe(id);
    expect((await jobRow(id)).status).toBe('running');
    await survivor.runUntilIdle(); // the lease still holds: nothing to take
    expect(runs).toEqual([]);

    await sleep(400); // the lease expires
    await survivor.runUntilIdle();
    expect(runs).toEqual(['survivor']);
    expect(await jobRow(id)).toMatchObject({ status: 'succeeded', attempts: 2 });

    // The dead worker comes back and tries to finish: refused, nothing changes, nothing reruns.
    if (!lost) throw new Error('nothing claimed');
    expect(await dying.complete(lost)).toBe(false);
    await dying.runUntilIdle();
    await survivor.runUntilIdle();
    expect(runs).toEqual(['survivor']);
    expect(await jobRow(id)).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('a live worker renews its lease: a long job is not taken over', async () => {
    const kind = uniqueKind('long');
    let runs = 0;
    const slow = async () => {
      runs++;
      await sleep(700);
    };
    const a = queue({ leaseMs: 200 });
    a.register(kind, slow);
    const b = queue({ leaseMs: 200 });
    b.register(kind, slow);
    const { id } = await a.enqueue(t.database.db, { kind, tenantId });
    const claimed = await a.claim();
    if (!claimed) throw new Error('nothing claimed');
    const running = a.run(claimed);
    for (let i = 0; i < 5; i++) {
      await sleep(120);
      await b.runUntilIdle();
    }
    await running;
    expect(runs).toBe(1);
    expect(await jobRow(id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('a job interrupted on every attempt ends failed without running again; onFailed hears of it', async () => {
    const kind = uniqueKind('doomed');
    let runs = 0;
    const failures: string[] = [];
    const a = queue({ leaseMs: 100 });
    a.register(
      kind,
      async () => {
        runs++;
      },
      { onFailed: async (job, error) => void failures.push(`${job.id}: ${error}`) },
    );
    const { id } = await a.enqueue(t.database.db, { kind, tenantId, maxAttempts: 1 });
    expect(await a.claim()).toBeDefined();
    await sleep(200);
    await a.runUntilIdle();
    expect(runs).toBe(0);
    const row = await jobRow(id);
    expect(row.status).toBe('failed');
    expect(row.last_error).toMatch(/interrupted on every attempt/);
    expect(failures).toEqual([`${id}: ${row.last_error}`]);
  });

  it('stop() waits for running handlers', async () => {
    const kind = uniqueKind('stop');
    let finished = false;
    const q = queue({ pollMs: 10 });
    q.register(kind, async () => {
      await sleep(300);
      finished = true;
    });
    const { id } = await q.enqueue(t.database.db, { kind, tenantId });
    q.start();
    await waitFor(async () => (await jobRow(id)).status === 'running');
    await q.stop();
    expect(finished).toBe(true);
    expect((await jobRow(id)).status).toBe('succeeded');
  });

  it('a job stopped by a shutdown goes back to the queue, due at once, without using up an attempt', async () => {
    const kind = uniqueKind('stopped');
    let runs = 0;
    const handler = async (_job: unknown, ctx: { signal: AbortSignal }) => {
      runs += 1;
      if (runs > 3) return; // the fourth run, after three restarts, completes
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    };
    const { id } = await queue().enqueue(t.database.db, { kind, tenantId, maxAttempts: 2 });
    // Three restarts, each stopping the job mid-run: more than its two attempts.
    for (let restart = 0; restart < 3; restart++) {
      const q = queue({ pollMs: 10, stopGraceMs: 20 });
      q.register(kind, handler);
      q.start();
      await waitFor(async () => (await jobRow(id)).status === 'running');
      await q.stop();
      expect(await jobRow(id)).toMatchObject({ status: 'queued', attempts: 0 });
    }
    const last = queue();
    last.register(kind, handler);
    await last.runUntilIdle();
    expect(await jobRow(id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(runs).toBe(4);
  });

  it('a lane runs its kinds on workers of its own: with its slots all held, a job of another kind still runs', async () => {
    const slow = uniqueKind('slow');
    const other = uniqueKind('other');
    const held: (() => void)[] = [];
    const q = queue({ pollMs: 10, concurrency: 2, lanes: [{ name: 'slow', kinds: [slow], concurrency: 2 }] });
    q.register(slow, () => new Promise<void>((resolve) => held.push(resolve)));
    q.register(other, async () => {});
    const slowIds: string[] = [];
    for (let i = 0; i < 3; i++) slowIds.push((await q.enqueue(t.database.db, { kind: slow, tenantId })).id);
    q.start();
    try {
      // The lane's two slots are taken; its third job waits for one.
      await waitFor(async () => held.length === 2);
      const { id } = await q.enqueue(t.database.db, { kind: other, tenantId });
      await waitFor(async () => (await jobRow(id)).status === 'succeeded');
      expect(held).toHaveLength(2);
      const states = await Promise.all(slowIds.map(async (slowId) => (await jobRow(slowId)).status));
      expect(states.sort()).toEqual(['queued', 'running', 'running']);
      // Released, the held jobs end and the third takes a freed slot.
      for (const release of held.splice(0)) release();
      await waitFor(async () => held.length === 1);
      held[0]?.();
      for (const slowId of slowIds) await waitFor(async () => (await jobRow(slowId)).status === 'succeeded');
    } finally {
      for (const release of held) release();
      await q.stop();
    }
  });

  it('claiming skips the tenants named: the oldest due job of another tenant is taken instead', async () => {
    const kind = uniqueKind('capped');
    const other = await t.tenant();
    const q = queue();
    q.register(kind, async () => {});
    const older = await q.enqueue(t.database.db, { kind, tenantId, runAt: new Date(Date.now() - 60_000) });
    const newer = await q.enqueue(t.database.db, {
      kind,
      tenantId: other.tenantId,
      runAt: new Date(Date.now() - 30_000),
    });
    const newest = await q.enqueue(t.database.db, { kind, tenantId: other.tenantId });
    const skipping = await q.claim([kind], [tenantId]);
    expect(skipping?.job).toMatchObject({ id: newer.id, tenantId: other.tenantId });
    // Without it, the oldest due job comes first, whoever's it is.
    const first = await q.claim([kind]);
    expect(first?.job.id).toBe(older.id);
    expect(await q.claim([kind], [tenantId, other.tenantId])).toBeUndefined();
    await q.runUntilIdle();
    for (const claimed of [skipping, first]) if (claimed) await q.complete(claimed);
    expect((await jobRow(newest.id)).status).toBe('succeeded');
  });

  it('a lane runs at most its tenant concurrency of one tenant’s jobs: a free slot goes to another tenant’s later job', async () => {
    const slow = uniqueKind('hog');
    const other = await t.tenant();
    const q = queue({ pollMs: 10, lanes: [{ name: 'capped', kinds: [slow], concurrency: 3, tenantConcurrency: 2 }] });
    const { held, most, drain } = holdingKind(q, slow);
    const hogIds: string[] = [];
    for (let i = 0; i < 5; i++) hogIds.push((await q.enqueue(t.database.db, { kind: slow, tenantId })).id);
    q.start();
    try {
      // Two of the tenant's jobs run; the third slot stays free though three more of its jobs are due.
      await waitFor(async () => held.length === 2);
      await sleep(100);
      expect(held).toHaveLength(2);
      // Another tenant's job, enqueued after all of them, takes that slot at once.
      const { id } = await q.enqueue(t.database.db, { kind: slow, tenantId: other.tenantId });
      await waitFor(async () => held.some((h) => h.tenantId === other.tenantId));
      expect((await jobRow(id)).status).toBe('running');
      const states = await Promise.all(hogIds.map(async (hogId) => (await jobRow(hogId)).status));
      expect(states.filter((s) => s === 'running')).toHaveLength(2);
      // One of the tenant's jobs ends: the next of its own takes the freed share.
      held.shift()?.release();
      await waitFor(async () => held.filter((h) => h.tenantId === tenantId).length === 2);
      await drain([...hogIds, id]);
      expect(most()).toBe(2);
    } finally {
      for (const h of held) h.release();
      await q.stop();
    }
  });

  it('the default lane gives a tenant half its workers while another tenant waits: the next free slot goes to the other tenant’s later job', async () => {
    const long = uniqueKind('crawl');
    const other = await t.tenant();
    const q = queue({ pollMs: 10, concurrency: 2 }); // a share of 1 each
    const { held, drain } = holdingKind(q, long);
    const own: string[] = [];
    for (let i = 0; i < 3; i++) own.push((await q.enqueue(t.database.db, { kind: long, tenantId })).id);
    q.start();
    try {
      // No other tenant's job is due: the tenant's jobs take both workers.
      await waitFor(async () => held.length === 2);
      expect(held.every((h) => h.tenantId === tenantId)).toBe(true);
      // Another tenant's job, enqueued after the tenant's third, waits for a worker...
      const { id } = await q.enqueue(t.database.db, { kind: long, tenantId: other.tenantId });
      await sleep(100);
      expect((await jobRow(id)).status).toBe('queued');
      // ...and takes the first that frees, before the tenant's older job.
      held.shift()?.release();
      await waitFor(async () => held.some((h) => h.tenantId === other.tenantId));
      expect((await jobRow(own[2] as string)).status).toBe('queued');
      await drain([...own, id]);
    } finally {
      for (const h of held) h.release();
      await q.stop();
    }
  });

  it('a lane with a tenant cap and a share: past its share a tenant yields the next free slot to a third tenant, and never passes its cap', async () => {
    const slow = uniqueKind('hung');
    const b = await t.tenant();
    const c = await t.tenant();
    const q = queue({
      pollMs: 10,
      lanes: [{ name: 'shared', kinds: [slow], concurrency: 3, tenantConcurrency: 2, tenantShare: 1 }],
    });
    const { held, most, drain } = holdingKind(q, slow);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await q.enqueue(t.database.db, { kind: slow, tenantId })).id);
    for (let i = 0; i < 4; i++) ids.push((await q.enqueue(t.database.db, { kind: slow, tenantId: b.tenantId })).id);
    q.start();
    try {
      // Nothing else due: the lane fills, the first tenant up to its cap (2), not past it.
      await waitFor(async () => held.length === 3);
      await sleep(100);
      expect(held.filter((h) => h.tenantId === tenantId)).toHaveLength(2);
      // A third tenant's job, enqueued after both backlogs, takes the next slot that frees.
      const { id } = await q.enqueue(t.database.db, { kind: slow, tenantId: c.tenantId });
      held.shift()?.release();
      await waitFor(async () => held.some((h) => h.tenantId === c.tenantId));
      ids.push(id);
      await drain(ids);
      expect(most()).toBe(2);
    } finally {
      for (const h of held) h.release();
      await q.stop();
    }
  });

  it('runUntilIdle drains every lane', async () => {
    const laned = uniqueKind('laned');
    const plain = uniqueKind('plain');
    const q = queue({ lanes: [{ name: 'own', kinds: [laned], concurrency: 1 }] });
    const ran: string[] = [];
    q.register(laned, async () => void ran.push('laned'));
    q.register(plain, async () => void ran.push('plain'));
    const a = await q.enqueue(t.database.db, { kind: laned, tenantId });
    const b = await q.enqueue(t.database.db, { kind: plain, tenantId });
    await q.runUntilIdle();
    expect(ran.sort()).toEqual(['laned', 'plain']);
    expect((await jobRow(a.id)).status).toBe('succeeded');
    expect((await jobRow(b.id)).status).toBe('succeeded');
  });

  it('a kind named by two lanes, or a lane without a slot (or without one per tenant), is refused when the queue is made', () => {
    expect(() =>
      queue({
        lanes: [
          { name: 'a', kinds: ['x'], concurrency: 1 },
          { name: 'b', kinds: ['x'], concurrency: 1 },
        ],
      }),
    ).toThrow(/'x' is named by two lanes/);
    expect(() => queue({ lanes: [{ name: 'a', kinds: ['x'], concurrency: 0 }] })).toThrow(/at least 1/);
    expect(() => queue({ lanes: [{ name: 'a', kinds: ['x'], concurrency: 2, tenantConcurrency: 0 }] })).toThrow(
      /tenant concurrency of at least 1/,
    );
    expect(() => queue({ lanes: [{ name: 'a', kinds: ['x'], concurrency: 2, tenantShare: 0 }] })).toThrow(
      /tenant share of at least 1/,
    );
    expect(() => queue({ tenantShare: 0 })).toThrow(/default job lane needs a tenant share of at least 1/);
  });

  it('several workers on one database never run a job twice', async () => {
    const kind = uniqueKind('shared');
    const runs = new Map<string, number>();
    const workers: string[] = [];
    // On PostgreSQL the second worker has its own connection pool, as a second process would.
    let second: DatabaseHandle | undefined;
    if (usingPostgres) {
      const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(t.database.db);
      second = await openDatabase({ url: process.env.TEST_DATABASE_URL, schema: rows[0]?.schema, poolSize: 4 });
    }
    const make = (name: string, db = t.database.db) => {
      const q = createJobQueue({ db, log: quiet, pollMs: 5, concurrency: 4 });
      q.register(kind, async (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        workers.push(name);
        await sleep(Math.random() * 15);
      });
      return q;
    };
    const queues = [make('a'), make('b', second?.db ?? t.database.db), make('c')];
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push((await queues[0]?.enqueue(t.database.db, { kind, tenantId }))?.id ?? '');
    for (const q of queues) q.start();
    try {
      await waitFor(async () => {
        const { count } = await t.database.db
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<number>().as('count'))
          .where('kind', '=', kind)
          .where('status', '=', 'succeeded')
          .executeTakeFirstOrThrow();
        return Number(count) === ids.length;
      }, 30_000);
    } finally {
      await Promise.all(queues.map((q) => q.stop()));
      await second?.close();
    }
    expect([...runs.keys()].sort()).toEqual([...ids].sort());
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(workers).toHaveLength(ids.length);
    if (usingPostgres) expect(new Set(workers).size).toBeGreaterThan(1);
  });
});
