// Custom data sources: real backing tables (created, kept by clear, dropped by delete), row upsert,
// batch, search ranking, tenant isolation and scopes. Spec: custom data source row; rules 7 and 8.
import { type KyselyPlugin, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { NotFoundError } from '../../src/domain/errors.js';
import { expectError, lockWaiters, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const BASE = '/api/v1/custom-data-sources';
const tableOf = (id: string) => `cds_${id.replace(/-/g, '')}`;

async function tableExists(id: string): Promise<boolean> {
  const { rows } = await sql<{ t: string | null }>`select to_regclass(${tableOf(id)})::text as t`.execute(
    t.database.db,
  );
  return rows[0]?.t !== null && rows[0]?.t !== undefined;
}

async function backingTableCount(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_class where relkind = 'r' and relname like 'cds\\_%'
      and relnamespace = (select oid from pg_namespace where nspname = current_schema())`.execute(t.database.db);
  return rows[0]?.n ?? -1;
}

async function rowCount(id: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(tableOf(id))}`.execute(
    t.database.db,
  );
  return rows[0]?.n ?? -1;
}

async function newSource(key: string, slug: string, fields?: unknown[]) {
  const created = await t.call({
    method: 'POST',
    url: BASE,
    key,
    body: { name: `Source ${slug}`, slug, ...(fields ? { fields } : {}) },
  });
  expect(created.status).toBe(201);
  return created.body as { id: string; slug: string };
}

const put = (key: string, source: string, externalId: string, body: unknown) =>
  t.call({ method: 'PUT', url: `${BASE}/${source}/rows/${encodeURIComponent(externalId)}`, key, body });

describe('custom data sources', () => {
  it('creates a source (201) with its own backing table, and lists and gets it by id and by slug', async () => {
    const { key } = await t.tenant();
    const created = await t.call({
      method: 'POST',
      url: BASE,
      key,
      body: { name: 'Orders', slug: 'orders', fields: [{ name: 'price', type: 'number', required: true }] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'custom_data_source',
      name: 'Orders',
      slug: 'orders',
      fields: [{ name: 'price', type: 'number', required: true }],
    });
    expect(await tableExists(created.body.id)).toBe(true);

    const bySlug = await t.call({ url: `${BASE}/orders`, key });
    const byId = await t.call({ url: `${BASE}/${created.body.id}`, key });
    expect(bySlug.status).toBe(200);
    expect(byId.body).toEqual(bySlug.body);
    const list = await t.call({ url: BASE, key });
    expect(list.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(list.body.data.map((s: { id: string }) => s.id)).toEqual([created.body.id]);
  });

  it('refuses a second source with the same slug (409 conflict, param slug) and creates no table', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'plans');
    const before = await backingTableCount();
    const again = await t.call({ method: 'POST', url: BASE, key, body: { name: 'Plans 2', slug: 'plans' } });
    expectError(again, 409, 'conflict', 'slug');
    expect(await backingTableCount()).toBe(before);
    const list = await t.call({ url: BASE, key });
    expect(list.body.data).toHaveLength(1);
  });

  it('a workspace holds at most CUSTOM_DATA_SOURCES_MAX sources (each a table), also when created at once: 409 past it, and room again after a delete', async () => {
    const capped = await startTestApp({ CUSTOM_DATA_SOURCES_MAX: '2' });
    try {
      const { key } = await capped.tenant();
      const create = (slug: string) =>
        capped.call({ method: 'POST', url: BASE, key, body: { name: `Source ${slug}`, slug } });
      const at = await Promise.all(['a', 'b', 'c', 'd', 'e'].map(create));
      expect(at.map((r) => r.status).sort()).toEqual([201, 201, 409, 409, 409]);
      const refused = at.find((r) => r.status === 409) as (typeof at)[number];
      expectError(refused, 409, 'conflict');
      expect(refused.body.error.message).toContain('its limit (CUSTOM_DATA_SOURCES_MAX)');
      const list = await capped.call({ url: BASE, key });
      expect(list.body.data).toHaveLength(2);
      // Another workspace has its own.
      const other = await capped.tenant();
      expect(
        (await capped.call({ method: 'POST', url: BASE, key: other.key, body: { name: 'X', slug: 'x' } })).status,
      ).toBe(201);
      const gone = list.body.data[0] as { id: string };
      expect((await capped.call({ method: 'DELETE', url: `${BASE}/${gone.id}`, key })).status).toBe(200);
      expect((await create('f')).status).toBe(201);
    } finally {
      await capped.close();
    }
  });

  it.skipIf(!usingPostgres)(
    "a creation waiting its turn holds back none of the workspace's other writes (rows that name its tenant)",
    async () => {
      let open = () => {};
      let gate: Promise<void> | undefined;
      const watched = new WeakSet<object>();
      const plugin: KyselyPlugin = {
        transformQuery: (args) => {
          const text = JSON.stringify(args.node);
          if (
            gate &&
            args.node.kind === 'SelectQueryNode' &&
            text.includes('"custom_data_sources"') &&
            text.includes('count(*)')
          ) {
            watched.add(args.queryId);
          }
          return args.node;
        },
        transformResult: async (args) => {
          if (watched.has(args.queryId)) await gate;
          return args.result;
        },
      };
      const app = await startTestApp({}, { wrapDb: (db) => db.withPlugin(plugin) });
      try {
        const { key } = await app.tenant();
        const first = await app.call({ method: 'POST', url: BASE, key, body: { name: 'First', slug: 'first' } });
        expect(first.status).toBe(201);
        gate = new Promise<void>((resolve) => (open = resolve));
        // Held after it took its turn on the tenant row, before its table is made.
        const creating = app.call({ method: 'POST', url: BASE, key, body: { name: 'Second', slug: 'second' } });
        await new Promise((resolve) => setTimeout(resolve, 300));
        const started = Date.now();
        const smart = await Promise.race([
          app.call({ method: 'POST', url: '/api/v1/smart-sources', key, body: { name: 'feed', data_source: 'first' } }),
          new Promise<null>((resolve) => setTimeout(() => resolve(null), 3000)),
        ]);
        open();
        gate = undefined;
        expect(smart?.status).toBe(201);
        expect(Date.now() - started).toBeLessThan(3000);
        expect((await creating).status).toBe(201);
      } finally {
        open();
        await app.close();
      }
    },
  );

  it('refuses a slug with SQL in it (422 validation_error, param slug), a UUID-shaped slug, and bad fields', async () => {
    const { key } = await t.tenant();
    for (const slug of ['x"; drop table tenants; --', "orders'); delete from api_keys; --", 'Orders', '', '-x']) {
      expectError(
        await t.call({ method: 'POST', url: BASE, key, body: { name: 'Bad', slug } }),
        422,
        'validation_error',
        'slug',
      );
    }
    expectError(
      await t.call({
        method: 'POST',
        url: BASE,
        key,
        body: { name: 'Bad', slug: '0190a6f8-1234-7abc-8def-0123456789ab' },
      }),
      422,
      'validation_error',
      'slug',
    );
    expectError(
      await t.call({
        method: 'POST',
        url: BASE,
        key,
        body: {
          name: 'Bad',
          slug: 'ok',
          fields: [
            { name: 'a', type: 'string' },
            { name: 'a', type: 'number' },
          ],
        },
      }),
      422,
      'validation_error',
      'fields[1].name',
    );
    expectError(
      await t.call({
        method: 'POST',
        url: BASE,
        key,
        body: { name: 'Bad', slug: 'ok', fields: [{ name: 'a', type: 'money' }] },
      }),
      422,
      'validation_error',
      'fields[0].type',
    );
    expectError(
      await t.call({ method: 'POST', url: BASE, key, body: { name: 'No slug' } }),
      422,
      'missing_required_parameter',
      'slug',
    );
    expect((await t.call({ url: BASE, key })).body.data).toEqual([]);
  });

  it('upserts a row: 201 when created, 200 when replaced, and reads back the spec row record exactly', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'stores');
    const first = await put(key, 'stores', 'store-1', {
      data: { city: 'Lyon', open: true },
      tags: ['fr', 'fr', 'city'],
      searchable_text: 'Lyon store',
    });
    expect(first.status).toBe(201);
    expect(Object.keys(first.body).sort()).toEqual(
      ['content', 'data', 'external_id', 'id', 'score', 'searchable_text', 'tags', 'updated_at'].sort(),
    );
    expect(first.body).toMatchObject({
      external_id: 'store-1',
      data: { city: 'Lyon', open: true },
      tags: ['fr', 'city'],
      searchable_text: 'Lyon store',
      content: '',
      score: null,
    });

    const second = await put(key, 'stores', 'store-1', { data: { city: 'Paris' } });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ id: first.body.id, data: { city: 'Paris' }, tags: [], searchable_text: '' });

    const read = await t.call({ url: `${BASE}/stores/rows/store-1`, key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(second.body);
  });

  it('routes external ids with slashes and unicode, URL-encoded in the path', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'paths');
    const slashed = await t.call({ method: 'PUT', url: `${BASE}/paths/rows/a%2Fb`, key, body: { data: { n: 1 } } });
    expect(slashed.status).toBe(201);
    expect(slashed.body.external_id).toBe('a/b');
    const unicode = 'café/東京 ✓';
    expect((await put(key, 'paths', unicode, { data: { n: 2 } })).status).toBe(201);

    expect((await t.call({ url: `${BASE}/paths/rows/a%2Fb`, key })).body.data).toEqual({ n: 1 });
    const readUnicode = await t.call({ url: `${BASE}/paths/rows/${encodeURIComponent(unicode)}`, key });
    expect(readUnicode.body).toMatchObject({ external_id: unicode, data: { n: 2 } });
    // `a/b` unencoded is another path, which names no row route.
    expectError(await t.call({ url: `${BASE}/paths/rows/a/b`, key }), 404, 'not_found');
    // A slug with a NUL or another control character names no source (never a database refusal).
    for (const slug of ['pa%00ths', 'pa%1Fths']) {
      expectError(await t.call({ url: `${BASE}/${slug}`, key }), 404, 'not_found');
      expectError(await t.call({ url: `${BASE}/${slug}/rows/a%2Fb`, key }), 404, 'not_found');
    }

    const deleted = await t.call({ method: 'DELETE', url: `${BASE}/paths/rows/a%2Fb`, key });
    expect(deleted.body).toEqual({ id: slashed.body.id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `${BASE}/paths/rows/a%2Fb`, key }), 404, 'not_found');
    expectError(await t.call({ method: 'DELETE', url: `${BASE}/paths/rows/a%2Fb`, key }), 404, 'not_found');
    expect(
      (await t.call({ url: `${BASE}/paths/rows`, key })).body.data.map((r: { external_id: string }) => r.external_id),
    ).toEqual([unicode]);
  });

  it('refuses external ids with control characters or over 100 characters (422, param external_id)', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'ids');
    expectError(await put(key, 'ids', 'a\u0001b', { data: {} }), 422, 'validation_error', 'external_id');
    expectError(
      await t.call({
        method: 'POST',
        url: `${BASE}/ids/rows/batch`,
        key,
        body: { rows: [{ external_id: 'x'.repeat(101), data: {} }] },
      }),
      422,
      'validation_error',
      'rows[0].external_id',
    );
    expectError(
      await t.call({
        method: 'POST',
        url: `${BASE}/ids/rows/batch`,
        key,
        body: { rows: [{ external_id: '😀'.repeat(60), data: {} }] },
      }),
      422,
      'validation_error',
      'rows[0].external_id',
    );
    expect(await rowCount((await t.call({ url: `${BASE}/ids`, key })).body.id)).toBe(0);
  });

  it('checks row data against declared fields (422 naming data.<field>), batch rows as rows[i].data.<field>', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'priced', [
      { name: 'price', type: 'number', required: true },
      { name: 'sku', type: 'string' },
      { name: 'since', type: 'date' },
    ]);
    expectError(
      await put(key, 'priced', 'p1', { data: { sku: 'A' } }),
      422,
      'missing_required_parameter',
      'data.price',
    );
    expectError(await put(key, 'priced', 'p1', { data: { price: '12' } }), 422, 'validation_error', 'data.price');
    expectError(await put(key, 'priced', 'p1', { data: { price: 1, sku: 5 } }), 422, 'validation_error', 'data.sku');
    expectError(
      await put(key, 'priced', 'p1', { data: { price: 1, since: 'yesterday' } }),
      422,
      'validation_error',
      'data.since',
    );
    // A day that does not exist, though Date.parse would take it (as 1 March).
    for (const since of ['2023-02-29', '2024-04-31T10:00:00Z']) {
      expectError(await put(key, 'priced', 'p1', { data: { price: 1, since } }), 422, 'validation_error', 'data.since');
    }
    expect((await put(key, 'priced', 'p1', { data: { price: 1, since: '2024-02-29T23:59:00+02:00' } })).status).toBe(
      201,
    );
    expect((await put(key, 'priced', 'p1', { data: { price: 1, since: '2024-05-01', extra: [1] } })).status).toBe(200);

    const batch = await t.call({
      method: 'POST',
      url: `${BASE}/priced/rows/batch`,
      key,
      body: {
        rows: [
          { external_id: 'p2', data: { price: 2 } },
          { external_id: 'p3', data: { price: 'three' } },
        ],
      },
    });
    expectError(batch, 422, 'validation_error', 'rows[1].data.price');
    expect(await rowCount(source.id)).toBe(1);
  });

  it("reads a declared field from the row's own keys: an optional field named like Object's methods may be left out", async () => {
    const { key } = await t.tenant();
    await newSource(key, 'cars', [
      { name: 'constructor', type: 'string' },
      { name: 'toString', type: 'number', required: true },
    ]);
    expect((await put(key, 'cars', 'c1', { data: { toString: 1 } })).status).toBe(201);
    expectError(await put(key, 'cars', 'c2', { data: {} }), 422, 'missing_required_parameter', 'data.toString');
    expectError(
      await put(key, 'cars', 'c3', { data: { toString: 1, constructor: 5 } }),
      422,
      'validation_error',
      'data.constructor',
    );
  });

  it('refuses a field named __proto__, a key no row could carry (422 validation_error, param fields[i].name)', async () => {
    const { key } = await t.tenant();
    const refused = await t.call({
      method: 'POST',
      url: BASE,
      key,
      body: {
        name: 'Proto',
        slug: 'proto',
        fields: [
          { name: 'price', type: 'number' },
          { name: '__proto__', type: 'json', required: true },
        ],
      },
    });
    const error = expectError(refused, 422, 'validation_error', 'fields[1].name');
    expect(error.message).toMatch(/__proto__/);
    expect((await t.call({ url: BASE, key })).body.data).toEqual([]);
    // `prototype` is a plain key a row carries.
    await newSource(key, 'plain', [{ name: 'prototype', type: 'string', required: true }]);
    expect((await put(key, 'plain', 'p1', { data: { prototype: 'x' } })).status).toBe(201);
  });

  it('refuses data nested more than 32 levels (422 validation_error, param data), never a 500', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'deep');
    const nest = (levels: number) => {
      let value: Record<string, unknown> = { leaf: true };
      for (let i = 1; i < levels; i++) value = { a: value };
      return value;
    };
    expect((await put(key, 'deep', 'ok', { data: nest(32) })).status).toBe(201);
    expectError(await put(key, 'deep', 'too-deep', { data: nest(33) }), 422, 'validation_error', 'data');
    // Hostile nesting, sent as raw text so the test itself does not recurse.
    const hostile = `{"data":${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}}`;
    const deep = await t.call({
      method: 'PUT',
      url: `${BASE}/deep/rows/hostile`,
      key,
      body: hostile,
      headers: { 'content-type': 'application/json' },
    });
    expectError(deep, 422, 'validation_error', 'data');
    expectError(await put(key, 'deep', 'nul', { data: { a: 'x\u0000y' } }), 422, 'validation_error', 'data.a');
    expectError(await put(key, 'deep', 'arr', { data: [1, 2] }), 422, 'validation_error', 'data');
    expectError(await t.call({ url: `${BASE}/deep/rows/too-deep`, key }), 404, 'not_found');
  });

  it('answers a huge body with 413 request_too_large and unindexable text with 422, never a 500', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'huge');
    // One row takes up to 1 MiB; a batch of rows up to BODY_LIMIT_BYTES.
    expectError(await put(key, 'huge', 'big', { data: { blob: 'x'.repeat(1024 * 1024) } }), 413, 'request_too_large');
    const batch = (row: Record<string, unknown>) =>
      t.call({ method: 'POST', url: `${BASE}/huge/rows/batch`, key, body: { rows: [row] } });
    const tooBig = await batch({ external_id: 'big', data: { blob: 'x'.repeat(t.config.bodyLimitBytes + 1) } });
    expectError(tooBig, 413, 'request_too_large');
    const words = Array.from({ length: 300_000 }, (_, i) => `w${i}`).join(' ');
    const unindexable = await batch({ external_id: 'words', data: {}, content: words });
    // Which row's index overflowed the batch's one statement does not tell: the batch is named.
    expectError(unindexable, 422, 'validation_error', 'rows');
    const large = await batch({ external_id: 'large', data: { blob: 'y'.repeat(2_000_000) } });
    expect(large.status).toBe(200);
    expect((await t.call({ url: `${BASE}/huge/rows/large`, key })).body.data.blob).toHaveLength(2_000_000);
    expect(
      (await t.call({ url: `${BASE}/huge/rows`, key })).body.data.map((r: { external_id: string }) => r.external_id),
    ).toEqual(['large']);
  });

  it('writes a batch of up to 100 rows all or nothing; 101 is too_many_items, 0 is empty_items, repeats are refused', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'bulk');
    const rows = (n: number, prefix = 'r') =>
      Array.from({ length: n }, (_, i) => ({ external_id: `${prefix}${i}`, data: { i } }));
    const batch = (body: unknown) => t.call({ method: 'POST', url: `${BASE}/bulk/rows/batch`, key, body });

    expectError(await batch({ rows: rows(101) }), 422, 'too_many_items', 'rows');
    expectError(await batch({ rows: [] }), 422, 'empty_items', 'rows');
    expectError(
      await batch({ rows: [...rows(3), { external_id: 'r1', data: {} }] }),
      422,
      'validation_error',
      'rows[3].external_id',
    );
    expect(await rowCount(source.id)).toBe(0);

    const full = await batch({ rows: rows(100) });
    expect(full.status).toBe(200);
    expect(full.body).toMatchObject({ object: 'rows_upserted', created_count: 100, updated_count: 0 });
    expect(full.body.data.map((r: { external_id: string }) => r.external_id)).toEqual(
      rows(100).map((r) => r.external_id),
    );

    const mixed = await batch({
      rows: [
        { external_id: 'r5', data: { i: 'five' } },
        { external_id: 'new', data: {} },
      ],
    });
    expect(mixed.body).toMatchObject({ created_count: 1, updated_count: 1 });
    expect(await rowCount(source.id)).toBe(101);
    expect((await t.call({ url: `${BASE}/bulk/rows/r5`, key })).body.data).toEqual({ i: 'five' });
  });

  it('writes batches over the same rows at once, sent in opposite orders, without a deadlock (all 200)', async () => {
    // On PostgreSQL two statements locking the same rows in opposite orders deadlock, and one fails.
    const { key } = await t.tenant();
    await newSource(key, 'racing');
    const ids = Array.from({ length: 100 }, (_, i) => `id-${i}`);
    const batch = (order: string[]) =>
      t.call({
        method: 'POST',
        url: `${BASE}/racing/rows/batch`,
        key,
        body: { rows: order.map((external_id) => ({ external_id, data: {} })) },
      });
    expect((await batch(ids)).status).toBe(200);
    const statuses: number[] = [];
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => batch(i % 2 === 0 ? ids : [...ids].reverse())),
      );
      statuses.push(...answers.map((answer) => answer.status));
    }
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
  });

  it('lists rows newest first with a cursor, and filters by tag', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'listing');
    for (let i = 0; i < 5; i++)
      await put(key, 'listing', `row-${i}`, { data: { i }, tags: i % 2 === 0 ? ['even'] : ['odd'] });

    const page1 = await t.call({ url: `${BASE}/listing/rows?limit=2`, key });
    expect(page1.body.data.map((r: { external_id: string }) => r.external_id)).toEqual(['row-4', 'row-3']);
    expect(page1.body.has_more).toBe(true);
    const page2 = await t.call({ url: `${BASE}/listing/rows?limit=2&cursor=${page1.body.next_cursor}`, key });
    const page3 = await t.call({ url: `${BASE}/listing/rows?limit=2&cursor=${page2.body.next_cursor}`, key });
    expect(page2.body.data.map((r: { external_id: string }) => r.external_id)).toEqual(['row-2', 'row-1']);
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(page3.body.data.map((r: { external_id: string }) => r.external_id)).toEqual(['row-0']);

    const even = await t.call({ url: `${BASE}/listing/rows?tag=even`, key });
    expect(even.body.data.map((r: { external_id: string }) => r.external_id)).toEqual(['row-4', 'row-2', 'row-0']);
    expect(even.body.data.every((r: { score: unknown }) => r.score === null)).toBe(true);
    expectError(await t.call({ url: `${BASE}/listing/rows?cursor=garbage`, key }), 422, 'validation_error', 'cursor');
  });

  it('ranks q matches by score, best first, and pages through them with the ranked cursor', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'faq');
    await put(key, 'faq', 'weak', { data: {}, content: 'Our shipping policy covers most countries and regions.' });
    await put(key, 'faq', 'best', {
      data: {},
      searchable_text: 'refund policy',
      content: 'Refund within 30 days: the refund policy explains every refund.',
    });
    await put(key, 'faq', 'middle', { data: {}, content: 'A refund can be asked for by mail.' });
    await put(key, 'faq', 'none', { data: {}, searchable_text: 'opening hours', content: 'We open at nine.' });

    const ranked = await t.call({ url: `${BASE}/faq/rows?q=${encodeURIComponent('refund policy')}`, key });
    expect(ranked.status).toBe(200);
    expect(ranked.body.data[0].external_id).toBe('best');
    const scores = ranked.body.data.map((r: { score: number }) => r.score);
    expect(scores.every((s: unknown) => typeof s === 'number' && s > 0)).toBe(true);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);

    const orQuery = encodeURIComponent('refund or shipping');
    const all = await t.call({ url: `${BASE}/faq/rows?q=${orQuery}`, key });
    expect(all.body.data.map((r: { external_id: string }) => r.external_id)).not.toContain('none');
    expect(all.body.data[0].external_id).toBe('best');
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { external_id: string }[]; next_cursor: string | null } } = await t.call({
        url: `${BASE}/faq/rows?q=${orQuery}&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
        key,
      });
      seen.push(...page.body.data.map((r) => r.external_id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all.body.data.map((r: { external_id: string }) => r.external_id));
    expect(seen).toHaveLength(3);

    expect((await t.call({ url: `${BASE}/faq/rows?q=nothingmatches`, key })).body.data).toEqual([]);
    expectError(await t.call({ url: `${BASE}/faq/rows?q=%20%20`, key }), 422, 'validation_error', 'q');
    expect(
      (await t.call({ url: `${BASE}/faq/rows?q=${encodeURIComponent("'); drop table x; --")}`, key })).status,
    ).toBe(200);
  });

  it('clears every row in one statement and keeps the source, its table and fields; new rows can be written at once', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'clearable', [{ name: 'n', type: 'number' }]);
    await put(key, 'clearable', 'a', { data: { n: 1 } });
    await put(key, 'clearable', 'b', { data: { n: 2 } });
    const cleared = await t.call({ method: 'POST', url: `${BASE}/clearable/rows/clear`, key });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toEqual({ object: 'rows_cleared', deleted_count: 2 });
    expect(await tableExists(source.id)).toBe(true);
    expect((await t.call({ url: `${BASE}/clearable`, key })).body.fields).toEqual([{ name: 'n', type: 'number' }]);
    expect((await t.call({ url: `${BASE}/clearable/rows`, key })).body.data).toEqual([]);
    expect((await put(key, 'clearable', 'a', { data: { n: 3 } })).status).toBe(201);
    expectError(await put(key, 'clearable', 'c', { data: { n: 'x' } }), 422, 'validation_error', 'data.n');
    expect((await t.call({ method: 'POST', url: `${BASE}/clearable/rows/clear`, key })).body.deleted_count).toBe(1);
    expect((await t.call({ method: 'POST', url: `${BASE}/clearable/rows/clear`, key })).body).toEqual({
      object: 'rows_cleared',
      deleted_count: 0,
    });
  });

  // PostgreSQL only: a second session holds rows while the clear runs.
  it.runIf(usingPostgres)('clears while a write holds rows, in any physical order, without a deadlock', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'held');
    // Stored `m` first, so a bare DELETE would lock `m` and then wait for `a`.
    await put(key, 'held', 'm', { data: {} });
    await put(key, 'held', 'a', { data: {} });
    const table = sql.table(tableOf(source.id));
    await t.database.db.connection().execute(async (session) => {
      await sql`begin`.execute(session);
      // A batch write locks its rows in `external_id` order: `a`, then `m`.
      await sql`update ${table} set tags = array['held'] where external_id = 'a'`.execute(session);
      const clearing = t.call({ method: 'POST', url: `${BASE}/held/rows/clear`, key });
      expect(await lockWaiters(session, sql`locktype in ('relation', 'transactionid')`)).toBe(1);
      await sql`update ${table} set tags = array['held'] where external_id = 'm'`.execute(session);
      await sql`commit`.execute(session);
      const cleared = await clearing;
      expect(cleared.status).toBe(200);
      expect(cleared.body).toEqual({ object: 'rows_cleared', deleted_count: 2 });
    });
    expect(await rowCount(source.id)).toBe(0);
  });

  it('clears a 100,000-row source in one call answering deleted_count 100000', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'big');
    await sql`
      insert into ${sql.table(tableOf(source.id))} (id, external_id, data, tags, searchable_text)
      select gen_random_uuid(), 'row-' || g, jsonb_build_object('n', g), array['seed'], 'row ' || g
      from generate_series(1, 100000) as g`.execute(t.database.db);
    expect(await rowCount(source.id)).toBe(100_000);
    const cleared = await t.call({ method: 'POST', url: `${BASE}/big/rows/clear`, key });
    expect(cleared.body).toEqual({ object: 'rows_cleared', deleted_count: 100_000 });
    expect(await rowCount(source.id)).toBe(0);
    expect(await tableExists(source.id)).toBe(true);
  });

  it('deletes a source: the backing table is dropped, and the source and its rows answer 404', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'doomed');
    await put(key, 'doomed', 'r1', { data: {} });
    const deleted = await t.call({ method: 'DELETE', url: `${BASE}/doomed`, key });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: source.id, object: 'deleted', deleted: true });
    expect(await tableExists(source.id)).toBe(false);

    expectError(await t.call({ url: `${BASE}/doomed`, key }), 404, 'not_found');
    expectError(await t.call({ url: `${BASE}/${source.id}`, key }), 404, 'not_found');
    expectError(await t.call({ url: `${BASE}/doomed/rows/r1`, key }), 404, 'not_found');
    expectError(await t.call({ url: `${BASE}/doomed/rows`, key }), 404, 'not_found');
    expectError(await put(key, 'doomed', 'r2', { data: {} }), 404, 'not_found');
    expectError(await t.call({ method: 'DELETE', url: `${BASE}/doomed`, key }), 404, 'not_found');
    // The slug is free again, with a new table.
    const again = await newSource(key, 'doomed');
    expect(again.id).not.toBe(source.id);
    expect(await tableExists(again.id)).toBe(true);
  });

  it('answers 404 for an unknown source on every route', async () => {
    const { key } = await t.tenant();
    for (const source of ['nope', '0190a6f8-1234-7abc-8def-0123456789ab']) {
      expectError(await t.call({ url: `${BASE}/${source}`, key }), 404, 'not_found');
      expectError(await t.call({ url: `${BASE}/${source}/rows`, key }), 404, 'not_found');
      expectError(await put(key, source, 'x', { data: {} }), 404, 'not_found');
      expectError(await t.call({ method: 'POST', url: `${BASE}/${source}/rows/clear`, key }), 404, 'not_found');
    }
  });

  it('sends a read at once while its table has room, and at most 32 keys to a statement: a small row read first is not held behind large ones', async () => {
    const { tenantId } = await t.tenant();
    const rows = t.services.customDataSources;
    await rows.createSource(tenantId, { name: 'Blobs', slug: 'blobs' });
    await rows.upsertRow(tenantId, 'blobs', 'small', { data: { v: 1 } });
    const blob = 'x'.repeat(100_000);
    const large = Array.from({ length: 40 }, (_, i) => `large-${i}`);
    for (const id of large) await rows.upsertRow(tenantId, 'blobs', id, { data: { blob } });
    await rows.getRow(tenantId, 'blobs', 'small'); // the source, looked up and kept
    const queries = vi.spyOn(t.database.db, 'executeQuery');
    try {
      const read = await Promise.all(['small', ...large].map((id) => rows.getRow(tenantId, 'blobs', id)));
      expect(read.map((row) => row.external_id)).toEqual(['small', ...large]);
      const sent = queries.mock.calls.map(([query]) => (query as unknown as { parameters: unknown[] }).parameters[0]);
      expect(sent[0]).toBe('small');
      const keys = sent.map((first) => (Array.isArray(first) ? first.length : 1));
      // The first alone; the turn's others beside it, 32 at most, and the rest when one returns.
      expect(keys).toEqual([1, 32, 8]);
    } finally {
      queries.mockRestore();
    }
  });

  it("reads many rows at once, coalesced per table: each read gets its own row, a missing one 404, another tenant's its own", async () => {
    const tenants = [await t.tenant(), await t.tenant()];
    // Keys an array literal would misread unquoted: the batch sends them as one text[] parameter.
    const special = ['NULL', 'null', 'a"b', 'c\\d', '{x,y}', ' padded ', "it's"];
    const ids = [...special, ...Array.from({ length: 30 - special.length }, (_, i) => `row ${i}/é`)];
    for (const [n, { key }] of tenants.entries()) {
      await newSource(key, 'shared');
      const rows = ids.map((external_id, i) => ({ external_id, data: { tenant: n, i } }));
      expect((await t.call({ method: 'POST', url: `${BASE}/shared/rows/batch`, key, body: { rows } })).status).toBe(
        200,
      );
      // The source is looked up (and kept a second) before the reads, so they all reach the table in one turn.
      expect((await t.call({ url: `${BASE}/shared/rows/${encodeURIComponent(ids[0] as string)}`, key })).status).toBe(
        200,
      );
    }
    const queries = vi.spyOn(t.database.db, 'executeQuery');
    try {
      const rows = t.services.customDataSources;
      const reads = tenants.flatMap(({ tenantId }) =>
        [...ids, ids[3] as string, 'absent'].map((id) => rows.getRow(tenantId, 'shared', id)),
      );
      const answers = await Promise.allSettled(reads);
      // Per table: one read at once, and the 31 of its turn (30 keys) as one statement beside it.
      expect(queries).toHaveBeenCalledTimes(4);
      for (const [n] of tenants.entries()) {
        const mine = answers.slice(n * 32, (n + 1) * 32);
        expect(mine.slice(0, 31).map((answer) => answer.status === 'fulfilled' && answer.value.data)).toEqual([
          ...ids.map((_, i) => ({ tenant: n, i })),
          { tenant: n, i: 3 },
        ]);
        expect((mine[31] as PromiseRejectedResult).reason).toBeInstanceOf(NotFoundError);
      }
    } finally {
      queries.mockRestore();
    }
    // Over HTTP too, reads at once answer each its own row.
    const { key } = tenants[1] as { key: string };
    const answers = await Promise.all(
      ids.map((id) => t.call({ url: `${BASE}/shared/rows/${encodeURIComponent(id)}`, key })),
    );
    expect(answers.map((answer) => [answer.status, answer.body.external_id, answer.body.data])).toEqual(
      ids.map((id, i) => [200, id, { tenant: 1, i }]),
    );
  });

  it("answers 404 on every id-bearing route for another tenant's source, and leaves its rows alone", async () => {
    const owner = await t.tenant();
    const other = await t.tenant();
    const source = await newSource(owner.key, 'private');
    await put(owner.key, 'private', 'secret', { data: { v: 1 } });
    const key = other.key;
    for (const ref of ['private', source.id]) {
      const u = `${BASE}/${ref}`;
      expectError(await t.call({ url: u, key }), 404, 'not_found');
      expectError(await t.call({ url: `${u}/rows`, key }), 404, 'not_found');
      expectError(await t.call({ url: `${u}/rows/secret`, key }), 404, 'not_found');
      expectError(await put(key, ref, 'secret', { data: { v: 2 } }), 404, 'not_found');
      expectError(
        await t.call({ method: 'POST', url: `${u}/rows/batch`, key, body: { rows: [{ external_id: 'x', data: {} }] } }),
        404,
        'not_found',
      );
      expectError(await t.call({ method: 'DELETE', url: `${u}/rows/secret`, key }), 404, 'not_found');
      expectError(await t.call({ method: 'POST', url: `${u}/rows/clear`, key }), 404, 'not_found');
      expectError(await t.call({ method: 'DELETE', url: u, key }), 404, 'not_found');
    }
    expect((await t.call({ url: BASE, key })).body.data).toEqual([]);
    // The same slug is free in the other tenant, with a table of its own.
    const mine = await newSource(key, 'private');
    expect(mine.id).not.toBe(source.id);
    expect((await t.call({ url: `${BASE}/private/rows/secret`, key: owner.key })).body.data).toEqual({ v: 1 });
    expect(await tableExists(source.id)).toBe(true);
  });

  it('needs knowledge:write to change anything (403 insufficient_scope); knowledge:read may read', async () => {
    const owner = await t.tenant();
    await newSource(owner.key, 'scoped');
    await put(owner.key, 'scoped', 'r', { data: {} });
    const reader = await t.key(owner.tenantId, ['knowledge:read']);
    expectError(
      await t.call({ method: 'POST', url: BASE, key: reader, body: { name: 'x', slug: 'x' } }),
      403,
      'insufficient_scope',
    );
    expectError(await put(reader, 'scoped', 'r', { data: {} }), 403, 'insufficient_scope');
    expectError(
      await t.call({
        method: 'POST',
        url: `${BASE}/scoped/rows/batch`,
        key: reader,
        body: { rows: [{ external_id: 'x', data: {} }] },
      }),
      403,
      'insufficient_scope',
    );
    expectError(
      await t.call({ method: 'DELETE', url: `${BASE}/scoped/rows/r`, key: reader }),
      403,
      'insufficient_scope',
    );
    expectError(
      await t.call({ method: 'POST', url: `${BASE}/scoped/rows/clear`, key: reader }),
      403,
      'insufficient_scope',
    );
    expectError(await t.call({ method: 'DELETE', url: `${BASE}/scoped`, key: reader }), 403, 'insufficient_scope');
    expect((await t.call({ url: `${BASE}/scoped/rows/r`, key: reader })).status).toBe(200);
    expect((await t.call({ url: `${BASE}/scoped/rows`, key: reader })).body.data).toHaveLength(1);
    const other = await t.key(owner.tenantId, ['apps:write']);
    expectError(await t.call({ url: `${BASE}/scoped`, key: other }), 403, 'insufficient_scope');
  });

  it('publishes its operations in the OpenAPI document with destructive operations marked', async () => {
    const doc = await t.call({ url: '/api/v1/openapi.json' });
    expect(doc.status).toBe(200);
    const paths = doc.body.paths as Record<string, Record<string, { operationId: string }>>;
    expect(paths['/api/v1/custom-data-sources/{id_or_slug}/rows/clear']?.post?.operationId).toBe(
      'clearCustomDataSourceRows',
    );
    expect(paths['/api/v1/custom-data-sources/{id_or_slug}/rows/{external_id}']?.put?.operationId).toBe(
      'upsertCustomDataSourceRow',
    );
  });
});
