// Full-text searches and dashboard reports are heavy queries (src/db/heavy-queries.ts): they run
// in a bounded number of slots, a tenant in at most its share of them, and under a time limit.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import { createFairSlots, createHeavyQueries } from '../../src/db/heavy-queries.js';
import { expectError, startTestApp, statementGate, type TestApp, usingPostgres } from '../helpers.js';

describe('fair slots', () => {
  it('hold at most `total`, a key at most `perKey`, and serve waiters in turn', async () => {
    const slots = createFairSlots(3, 2);
    const a1 = await slots.acquire('a', 1000);
    const a2 = await slots.acquire('a', 1000);
    expect(slots.held('a')).toBe(2);
    // a's share is full: a third waits, while b still gets a slot.
    const a3 = slots.acquire('a', 1000);
    const b1 = await slots.acquire('b', 1000);
    expect(slots.held()).toBe(3);
    // Every slot is taken: b and c wait behind a.
    const b2 = slots.acquire('b', 1000);
    const c1 = slots.acquire('c', 1000);
    expect(slots.waiting()).toBe(3);
    const order: string[] = [];
    void a3.then(() => order.push('a3'));
    void b2.then(() => order.push('b2'));
    void c1.then(() => order.push('c1'));
    // b's slot frees: a3 is first in line, but a holds its share; of b2 and c1, c was never served.
    b1?.();
    b1?.(); // a second release of the same slot changes nothing
    await Promise.resolve();
    expect(order).toEqual(['c1']);
    a1?.(); // a3 (a served before b) goes before b2, a under its share again
    await Promise.resolve();
    expect(order).toEqual(['c1', 'a3']);
    expect(slots.held('a')).toBe(2);
    a2?.();
    await Promise.resolve();
    expect(order).toEqual(['c1', 'a3', 'b2']);
    expect(slots.waiting()).toBe(0);
  });

  it('with one slot, tenants take turns: a key with many waiters does not keep another behind them all', async () => {
    const slots = createFairSlots(1, 1);
    const first = await slots.acquire('a', 1000);
    const order: string[] = [];
    const grants = new Map<string, () => void>();
    const wait = (name: string, key: string) =>
      slots.acquire(key, 1000).then((release) => {
        order.push(name);
        if (release) grants.set(name, release);
      });
    const all = [wait('a1', 'a'), wait('a2', 'a'), wait('a3', 'a'), wait('b1', 'b')];
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    first?.(); // b was never served: b1 goes before a's earlier waiters
    await settle();
    expect(order).toEqual(['b1']);
    for (const name of ['b1', 'a1', 'a2', 'a3']) {
      grants.get(name)?.();
      await settle();
    }
    await Promise.all(all);
    expect(order).toEqual(['b1', 'a1', 'a2', 'a3']);
    expect(slots.held()).toBe(0);
  });

  it('give up after the wait, and leave the line', async () => {
    const slots = createFairSlots(1, 1);
    const first = await slots.acquire('a', 1000);
    const started = Date.now();
    expect(await slots.acquire('b', 60)).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
    expect(slots.waiting()).toBe(0);
    first?.();
    expect(slots.held()).toBe(0);
    expect(await slots.acquire('b', 60)).toBeTypeOf('function');
  });
});

describe('heavy queries on the database', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  const limit = (timeoutMs: number) => ({
    timeoutMs,
    tooLong: () => new Error('too long'),
    busy: () => new Error('busy'),
  });

  it.skipIf(!usingPostgres)('PostgreSQL cancels a statement past the time limit, and its slot frees', async () => {
    const heavy = createHeavyQueries(t.database.db, { maxConcurrent: 1, perTenant: 1 });
    const started = Date.now();
    await expect(heavy.run('t1', limit(200), (trx) => sql`select pg_sleep(5)`.execute(trx))).rejects.toThrow(
      'too long',
    );
    // Canceled, not abandoned: the slot is free long before the 5 s sleep would have ended.
    while (Date.now() - started < 2000) {
      const release = await heavy.run('t1', limit(50), async () => 'ran').catch(() => undefined);
      if (release === 'ran') break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a query that has no connection by its deadline never ran: it answers busy, and does not run when one comes', async () => {
    // PostgreSQL: a pool of one, held by a transaction. PGlite: a transaction holds its one session.
    const own = usingPostgres ? await openDatabase({ url: process.env.TEST_DATABASE_URL, poolSize: 1 }) : undefined;
    const db = own?.db ?? t.database.db;
    try {
      let end = () => {};
      const holding = db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        await new Promise<void>((resolve) => (end = resolve));
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const heavy = createHeavyQueries(db, { maxConcurrent: 1, perTenant: 1 });
      let ran = false;
      const work = async () => {
        ran = true;
        return 'ran';
      };
      await expect(heavy.run('t1', limit(100), work)).rejects.toThrow('busy');
      end();
      await holding;
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(ran).toBe(false);
      expect(await heavy.run('t1', limit(2000), async () => 'again')).toBe('again');
    } finally {
      await own?.close();
    }
  });

  it('the slot stays taken until the statement ends, though the deadline has answered', async () => {
    const heavy = createHeavyQueries(t.database.db, { maxConcurrent: 1, perTenant: 1 });
    let finish = () => {};
    const held = new Promise<void>((resolve) => (finish = resolve));
    // Work that outlives its deadline (the statement PGlite cannot cancel).
    await expect(heavy.run('t1', limit(50), () => held)).rejects.toThrow('too long');
    await expect(heavy.run('t2', limit(50), async () => 'ran')).rejects.toThrow('busy');
    finish();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await heavy.run('t2', limit(200), async () => 'ran')).toBe('ran');
  });
});

describe('full-text searches over HTTP', () => {
  let t: TestApp;
  let held: string | undefined; // the tenant whose searches the database holds, until released
  // A database that holds one tenant's full-text searches until released (their slots stay taken):
  // the lists' `q` and the agent's knowledge search.
  const searches = statementGate(
    (fragments, parameters) =>
      fragments.some(
        (fragment) => fragment.includes('websearch_to_tsquery') || fragment.includes('knowledge_passages'),
      ) &&
      (held === '*' || parameters.includes(held)),
  );
  /** A tenant's searches, or '*' for every search (a row search's statement names no tenant). */
  const holdSearchesOf = (tenantId: string) => {
    held = tenantId;
    searches.hold();
  };
  const release = () => {
    searches.release();
    held = undefined;
  };

  beforeAll(async () => {
    t = await startTestApp(
      { SEARCH_MAX_CONCURRENT: '2', SEARCH_TIMEOUT_MS: '300', ANALYTICS_TIMEOUT_MS: '300' },
      { wrapDb: (db) => db.withPlugin(searches.plugin) },
    );
  });
  afterAll(async () => {
    release();
    await t.close();
  });

  async function tenantWithDocument() {
    const tenant = await t.tenant();
    const created = await t.call({
      method: 'POST',
      url: '/api/v1/documents',
      key: tenant.key,
      body: { title: 'Returns', content: 'Parcels can be returned within thirty days.' },
    });
    expect(created.status).toBe(201);
    return tenant;
  }

  it("a search past the time limit answers 422 naming q; the tenant's next waits for a slot of its share, then answers 503", async () => {
    const a = await tenantWithDocument();
    holdSearchesOf(a.tenantId);
    // a's first search holds its one slot (of two) in the database past its time limit...
    const first = t.call({ url: '/api/v1/documents?q=parcels', key: a.key });
    await new Promise((resolve) => setTimeout(resolve, 50));
    // ...so its second waits for a slot of a's share, and gives up at the limit.
    const waited = await t.call({ url: '/api/v1/documents?q=returned', key: a.key });
    expectError(waited, 503, 'service_unavailable');
    expect(waited.body.error.message).toContain('Too many searches');
    expect(waited.headers['retry-after']).toBe('5');
    const stopped = await first;
    expectError(stopped, 422, 'validation_error', 'q');
    expect(stopped.body.error.message).toContain('took longer than 300 ms');

    // Once the database answers, the slot is a's again.
    release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const again = await t.call({ url: '/api/v1/documents?q=parcels', key: a.key });
    expect(again.status).toBe(200);
    expect(again.body.data).toHaveLength(1);
  });

  // On PGlite one open transaction holds every other client's statements (one database session).
  it.skipIf(!usingPostgres)("another tenant's searches run while one tenant's fill its share", async () => {
    const a = await tenantWithDocument();
    const b = await tenantWithDocument();
    holdSearchesOf(a.tenantId);
    const first = t.call({ url: '/api/v1/documents?q=parcels', key: a.key });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const other = await t.call({ url: '/api/v1/documents?q=parcels', key: b.key });
    expect(other.status).toBe(200);
    expect(other.body.data).toHaveLength(1);
    expect((await first).status).toBe(422);
    release();
  });

  it('a search of custom data source rows is bounded the same way', async () => {
    const a = await t.tenant();
    const source = await t.call({
      method: 'POST',
      url: '/api/v1/custom-data-sources',
      key: a.key,
      body: { name: 'Orders', slug: 'orders' },
    });
    expect(source.status).toBe(201);
    const slug = source.body.slug as string;
    const row = await t.call({
      method: 'PUT',
      url: `/api/v1/custom-data-sources/${slug}/rows/o-1`,
      key: a.key,
      body: { data: {}, searchable_text: 'parcel returned' },
    });
    expect(row.status).toBeLessThan(300);
    holdSearchesOf('*');
    const first = t.call({ url: `/api/v1/custom-data-sources/${slug}/rows?q=parcel`, key: a.key });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expectError(
      await t.call({ url: `/api/v1/custom-data-sources/${slug}/rows?q=returned`, key: a.key }),
      503,
      'service_unavailable',
    );
    expectError(await first, 422, 'validation_error', 'q');
    release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const found = await t.call({ url: `/api/v1/custom-data-sources/${slug}/rows?q=parcel`, key: a.key });
    expect(found.status).toBe(200);
    expect(found.body.data).toHaveLength(1);
  });

  // On PGlite the held search's transaction would hold the one session the turn writes its end in.
  it.skipIf(!usingPostgres)(
    'an agent turn whose knowledge search runs past the limit ends FAILED with knowledge_search_timeout; the next turn answers',
    async () => {
      const a = await tenantWithDocument();
      holdSearchesOf(a.tenantId);
      const sent = await t.call({
        method: 'POST',
        url: '/api/v1/messages',
        key: a.key,
        body: { content: 'Can parcels be returned?' },
      });
      expect(sent.status).toBe(200);
      expect(sent.body).toMatchObject({
        status: 'FAILED',
        error: { code: 'knowledge_search_timeout', message: expect.stringContaining('longer than 300 ms') },
      });
      release();
      await new Promise((resolve) => setTimeout(resolve, 20));
      const again = await t.call({
        method: 'POST',
        url: '/api/v1/messages',
        key: a.key,
        body: { content: 'Can parcels be returned?', conversation_id: sent.body.conversation_id },
      });
      expect(again.body).toMatchObject({ status: 'COMPLETED', error: null });
      expect(again.body.content).toContain('thirty days');
    },
  );

  it.skipIf(!usingPostgres)(
    'a simulation case whose search finds no slot is played again on the run’s retry, not failed',
    async () => {
      const a = await tenantWithDocument();
      const dataset = await t.call({
        method: 'POST',
        url: '/api/v1/simulation/datasets',
        key: a.key,
        body: { name: 'ds' },
      });
      const added = await t.call({
        method: 'POST',
        url: `/api/v1/simulation/datasets/${dataset.body.id}/test-cases`,
        key: a.key,
        body: { question: 'Can parcels be returned?', expected_type: 'answer', expected_answer: 'Within thirty days.' },
      });
      expect(added.status).toBe(201);
      // a's one slot is held by a search of its documents: the case's knowledge search finds none.
      holdSearchesOf(a.tenantId);
      const holder = t.call({ url: '/api/v1/documents?q=parcels', key: a.key });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const started = await t.call({
        method: 'POST',
        url: `/api/v1/simulation/datasets/${dataset.body.id}/runs`,
        key: a.key,
        body: {},
      });
      expect(started.status).toBe(201);
      await t.jobs.runUntilIdle();
      const job = () =>
        t.database.db
          .selectFrom('jobs')
          .select(['id', 'status', 'last_error'])
          .where('payload', '@>', sql<never>`${JSON.stringify({ run_id: started.body.id })}::jsonb`)
          .executeTakeFirstOrThrow();
      expect(await job()).toMatchObject({
        status: 'queued',
        last_error: expect.stringContaining('no knowledge search slot'),
      });
      const results = await t.call({ url: `/api/v1/simulation/runs/${started.body.id}/results`, key: a.key });
      expect(results.body.data.map((r: { status: string }) => r.status)).toEqual(['pending']);

      expect((await holder).status).toBe(422);
      release();
      await new Promise((resolve) => setTimeout(resolve, 20));
      // The retry, due now: the case plays and passes.
      await t.database.db
        .updateTable('jobs')
        .set({ run_at: sql`now()` })
        .where('id', '=', (await job()).id)
        .execute();
      await t.jobs.runUntilIdle();
      const run = await t.call({ url: `/api/v1/simulation/runs/${started.body.id}`, key: a.key });
      expect(run.body).toMatchObject({ status: 'completed' });
      const played = await t.call({ url: `/api/v1/simulation/runs/${started.body.id}/results`, key: a.key });
      expect(played.body.data.map((r: { status: string }) => r.status)).toEqual(['passed']);
    },
  );

  it('a dashboard report waits for the same slots', async () => {
    const a = await tenantWithDocument();
    holdSearchesOf(a.tenantId);
    const first = t.call({ url: '/api/v1/documents?q=parcels', key: a.key });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const report = await t.call({
      method: 'POST',
      url: '/api/v1/analytics/dashboard',
      key: a.key,
      body: { report_type: 'last_7_days' },
    });
    expectError(report, 503, 'service_unavailable');
    expect((await first).status).toBe(422);
    release();
  });
});
