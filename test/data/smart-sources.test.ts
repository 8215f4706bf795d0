// Smart sources: ingest tags rows `smart-source:<id>`; purge removes exactly the rows carrying the
// tag, in every custom data source of the tenant (spec rule 9); isolation, scopes, bulk bounds,
// and what happens when the data source is deleted.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const DS = '/api/v1/custom-data-sources';
const SS = '/api/v1/smart-sources';

async function newSource(key: string, slug: string) {
  const created = await t.call({ method: 'POST', url: DS, key, body: { name: slug, slug } });
  expect(created.status).toBe(201);
  return created.body as { id: string };
}

async function newSmart(key: string, dataSource: string, name = 'feed') {
  const created = await t.call({ method: 'POST', url: SS, key, body: { name, data_source: dataSource } });
  expect(created.status).toBe(201);
  return created.body as { id: string; tag: string; data_source_id: string | null };
}

const ingest = (key: string, id: string, rows: unknown) =>
  t.call({ method: 'POST', url: `${SS}/${id}/ingest`, key, body: { rows } });

async function externalIds(key: string, source: string): Promise<string[]> {
  const list = await t.call({ url: `${DS}/${source}/rows?limit=100`, key });
  expect(list.status).toBe(200);
  return list.body.data.map((r: { external_id: string }) => r.external_id).sort();
}

describe('smart sources', () => {
  it('creates a smart source (201) by data source slug or id, and lists and gets it', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'catalog');
    const bySlug = await t.call({ method: 'POST', url: SS, key, body: { name: 'Shop feed', data_source: 'catalog' } });
    expect(bySlug.status).toBe(201);
    expect(bySlug.body).toMatchObject({
      object: 'smart_source',
      name: 'Shop feed',
      data_source_id: source.id,
      tag: `smart-source:${bySlug.body.id}`,
    });
    const byId = await newSmart(key, source.id, 'Other feed');
    expect(byId.data_source_id).toBe(source.id);

    const got = await t.call({ url: `${SS}/${bySlug.body.id}`, key });
    expect(got.body).toEqual(bySlug.body);
    const list = await t.call({ url: SS, key });
    expect(list.body).toMatchObject({ object: 'list', has_more: false });
    expect(list.body.data.map((s: { id: string }) => s.id)).toEqual([byId.id, bySlug.body.id]);
  });

  it('refuses a data_source naming nothing in this tenant (422 invalid_parameters, param data_source)', async () => {
    const owner = await t.tenant();
    const foreign = await newSource(owner.key, 'foreign');
    const { key } = await t.tenant();
    for (const dataSource of ['missing', foreign.id, 'foreign', '0190a6f8-1234-7abc-8def-0123456789ab']) {
      expectError(
        await t.call({ method: 'POST', url: SS, key, body: { name: 'x', data_source: dataSource } }),
        422,
        'invalid_parameters',
        'data_source',
      );
    }
    expectError(
      await t.call({ method: 'POST', url: SS, key, body: { name: 'x' } }),
      422,
      'missing_required_parameter',
      'data_source',
    );
    expect((await t.call({ url: SS, key })).body.data).toEqual([]);
  });

  it('ingests rows into its data source, each tagged smart-source:<id> besides its own tags', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'products');
    const smart = await newSmart(key, 'products');
    const written = await ingest(key, smart.id, [
      { external_id: 'p1', data: { name: 'Lamp' }, tags: ['lighting'], searchable_text: 'desk lamp' },
      { external_id: 'p2', data: { name: 'Chair' } },
    ]);
    expect(written.status).toBe(200);
    expect(written.body).toMatchObject({ object: 'rows_upserted', created_count: 2, updated_count: 0 });
    expect(written.body.data.map((r: { tags: string[] }) => r.tags)).toEqual([['lighting', smart.tag], [smart.tag]]);

    const row = await t.call({ url: `${DS}/products/rows/p1`, key });
    expect(row.body).toMatchObject({ data: { name: 'Lamp' }, tags: ['lighting', smart.tag] });
    const tagged = await t.call({ url: `${DS}/products/rows?tag=${encodeURIComponent(smart.tag)}`, key });
    expect(tagged.body.data).toHaveLength(2);

    const again = await ingest(key, smart.id, [{ external_id: 'p1', data: { name: 'Lamp 2' }, tags: [smart.tag] }]);
    expect(again.body).toMatchObject({ created_count: 0, updated_count: 1 });
    expect(again.body.data[0].tags).toEqual([smart.tag]);
  });

  it('purges exactly the rows carrying its tag across two data sources, and leaves every other row', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'first');
    await newSource(key, 'second');
    const mine = await newSmart(key, 'first', 'mine');
    const theirs = await newSmart(key, 'second', 'theirs');

    await ingest(key, mine.id, [
      { external_id: 'm1', data: {} },
      { external_id: 'm2', data: {}, tags: ['keep-me?'] },
    ]);
    // A row carrying the tag in another data source (copied there by a client) is purged too.
    await t.call({ method: 'PUT', url: `${DS}/second/rows/copied`, key, body: { data: {}, tags: [mine.tag, 'x'] } });
    await ingest(key, theirs.id, [{ external_id: 't1', data: {} }]);
    await t.call({ method: 'PUT', url: `${DS}/first/rows/manual`, key, body: { data: {}, tags: ['keep-me?'] } });
    await t.call({ method: 'PUT', url: `${DS}/second/rows/manual`, key, body: { data: {} } });
    // A tag that merely starts like ours is another tag.
    await t.call({
      method: 'PUT',
      url: `${DS}/second/rows/prefix`,
      key,
      body: { data: {}, tags: [`${mine.tag}-not`] },
    });

    const purged = await t.call({ method: 'POST', url: `${SS}/${mine.id}/purge-rows`, key });
    expect(purged.status).toBe(200);
    expect(purged.body).toEqual({ object: 'purge', deleted_count: 3 });
    expect(await externalIds(key, 'first')).toEqual(['manual']);
    expect(await externalIds(key, 'second')).toEqual(['manual', 'prefix', 't1']);

    expect((await t.call({ method: 'POST', url: `${SS}/${mine.id}/purge-rows`, key })).body.deleted_count).toBe(0);
    expect((await t.call({ method: 'POST', url: `${SS}/${theirs.id}/purge-rows`, key })).body.deleted_count).toBe(1);
    expect(await externalIds(key, 'second')).toEqual(['manual', 'prefix']);
  });

  it('takes its id in upper case as the same id: the tag it writes and the one it purges are one (REST and MCP)', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'cased');
    const smart = await newSmart(key, 'cased');
    const upper = smart.id.toUpperCase();
    const ingested = await ingest(key, upper, [{ external_id: 'u1', data: {} }]);
    expect(ingested.status).toBe(200);
    expect(ingested.body.data[0].tags).toEqual([smart.tag]);
    await ingest(key, smart.id, [{ external_id: 'l1', data: {} }]);
    const viaMcp = await t.call({
      method: 'POST',
      url: '/api/v1/mcp',
      key,
      headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'ingest_smart_source_rows',
          arguments: { smart_source_id: upper, rows: [{ external_id: 'm1', data: {} }] },
        },
      },
    });
    expect(viaMcp.body.result.structuredContent.data[0].tags).toEqual([smart.tag]);

    const purged = await t.call({ method: 'POST', url: `${SS}/${upper}/purge-rows`, key });
    expect(purged.body).toEqual({ object: 'purge', deleted_count: 3 });
    expect(await externalIds(key, 'cased')).toEqual([]);
  });

  it('purges while it ingests the same rows without a deadlock: every answer is 200', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'busy');
    const smart = await newSmart(key, 'busy');
    const rows = Array.from({ length: 100 }, (_, i) => ({ external_id: `r-${i}`, data: { i } }));
    const statuses: number[] = [];
    for (let round = 0; round < 6; round++) {
      const answers = await Promise.all([
        ...Array.from({ length: 8 }, () => ingest(key, smart.id, rows)),
        ...Array.from({ length: 3 }, () => t.call({ method: 'POST', url: `${SS}/${smart.id}/purge-rows`, key })),
      ]);
      statuses.push(...answers.map((answer) => answer.status));
    }
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
  });

  it("purges only its own tenant's rows", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    await newSource(a.key, 'shared-slug');
    await newSource(b.key, 'shared-slug');
    const smart = await newSmart(a.key, 'shared-slug');
    await ingest(a.key, smart.id, [{ external_id: 'r', data: {} }]);
    // Tenant b writes a row with the same tag text into its own source.
    await t.call({ method: 'PUT', url: `${DS}/shared-slug/rows/r`, key: b.key, body: { data: {}, tags: [smart.tag] } });
    const purged = await t.call({ method: 'POST', url: `${SS}/${smart.id}/purge-rows`, key: a.key });
    expect(purged.body.deleted_count).toBe(1);
    expect(await externalIds(b.key, 'shared-slug')).toEqual(['r']);
  });

  it('bounds ingest to 1..100 rows (too_many_items, empty_items) and writes nothing on a bad row', async () => {
    const { key } = await t.tenant();
    const source = await newSource(key, 'bounded');
    const smart = await newSmart(key, 'bounded');
    const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ external_id: `r${i}`, data: {} }));
    expectError(await ingest(key, smart.id, rows(101)), 422, 'too_many_items', 'rows');
    expectError(await ingest(key, smart.id, []), 422, 'empty_items', 'rows');
    expectError(
      await ingest(key, smart.id, [...rows(2), { external_id: 'r0', data: {} }]),
      422,
      'validation_error',
      'rows[2].external_id',
    );
    expectError(await ingest(key, smart.id, [{ external_id: 'x' }]), 422, 'missing_required_parameter', 'rows[0].data');
    // A row holds at most 100 tags, the smart source's own among them: 99 of its own, or the tag itself.
    const tags = (n: number) => Array.from({ length: n }, (_, i) => `t${i}`);
    expectError(
      await ingest(key, smart.id, [{ external_id: 'x', data: {}, tags: tags(100) }]),
      422,
      'validation_error',
      'rows[0].tags',
    );
    const { rows: counted } = await sql<{ n: number }>`
      select count(*)::int as n from ${sql.table(`cds_${source.id.replace(/-/g, '')}`)}`.execute(t.database.db);
    expect(counted[0]?.n).toBe(0);
    expect((await ingest(key, smart.id, rows(100))).body.created_count).toBe(100);
    expect((await ingest(key, smart.id, [{ external_id: 'x', data: {}, tags: tags(99) }])).status).toBe(200);
    expect((await ingest(key, smart.id, [{ external_id: 'y', data: {}, tags: [...tags(99), smart.tag] }])).status).toBe(
      200,
    );
  });

  it('outlives a deleted data source: data_source_id becomes null, ingest answers 409, purge still works', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'gone');
    await newSource(key, 'stays');
    const smart = await newSmart(key, 'gone');
    await ingest(key, smart.id, [{ external_id: 'a', data: {} }]);
    await t.call({ method: 'PUT', url: `${DS}/stays/rows/b`, key, body: { data: {}, tags: [smart.tag] } });
    expect((await t.call({ method: 'DELETE', url: `${DS}/gone`, key })).status).toBe(200);

    const after = await t.call({ url: `${SS}/${smart.id}`, key });
    expect(after.status).toBe(200);
    expect(after.body.data_source_id).toBeNull();
    expectError(await ingest(key, smart.id, [{ external_id: 'c', data: {} }]), 409, 'conflict');
    const purged = await t.call({ method: 'POST', url: `${SS}/${smart.id}/purge-rows`, key });
    expect(purged.body).toEqual({ object: 'purge', deleted_count: 1 });
    expect(await externalIds(key, 'stays')).toEqual([]);
  });

  it('deletes a smart source and keeps the rows it wrote', async () => {
    const { key } = await t.tenant();
    await newSource(key, 'kept');
    const smart = await newSmart(key, 'kept');
    await ingest(key, smart.id, [{ external_id: 'k', data: {} }]);
    const deleted = await t.call({ method: 'DELETE', url: `${SS}/${smart.id}`, key });
    expect(deleted.body).toEqual({ id: smart.id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `${SS}/${smart.id}`, key }), 404, 'not_found');
    expectError(await t.call({ method: 'POST', url: `${SS}/${smart.id}/purge-rows`, key }), 404, 'not_found');
    expect(await externalIds(key, 'kept')).toEqual(['k']);
  });

  it("answers 404 for another tenant's smart source, an unknown one and a non-UUID id, on every route", async () => {
    const owner = await t.tenant();
    await newSource(owner.key, 'owned');
    const smart = await newSmart(owner.key, 'owned');
    await ingest(owner.key, smart.id, [{ external_id: 'o', data: {} }]);
    const { key } = await t.tenant();
    for (const id of [smart.id, '0190a6f8-1234-7abc-8def-0123456789ab', 'not-a-uuid']) {
      expectError(await t.call({ url: `${SS}/${id}`, key }), 404, 'not_found');
      expectError(await ingest(key, id, [{ external_id: 'x', data: {} }]), 404, 'not_found');
      expectError(await t.call({ method: 'POST', url: `${SS}/${id}/purge-rows`, key }), 404, 'not_found');
      expectError(await t.call({ method: 'DELETE', url: `${SS}/${id}`, key }), 404, 'not_found');
    }
    expect(await externalIds(owner.key, 'owned')).toEqual(['o']);
    expect((await t.call({ url: `${SS}/${smart.id}`, key: owner.key })).status).toBe(200);
  });

  it('needs knowledge:write to create, ingest, purge or delete (403 insufficient_scope)', async () => {
    const owner = await t.tenant();
    await newSource(owner.key, 'guarded');
    const smart = await newSmart(owner.key, 'guarded');
    const reader = await t.key(owner.tenantId, ['knowledge:read']);
    expectError(
      await t.call({ method: 'POST', url: SS, key: reader, body: { name: 'x', data_source: 'guarded' } }),
      403,
      'insufficient_scope',
    );
    expectError(await ingest(reader, smart.id, [{ external_id: 'x', data: {} }]), 403, 'insufficient_scope');
    expectError(
      await t.call({ method: 'POST', url: `${SS}/${smart.id}/purge-rows`, key: reader }),
      403,
      'insufficient_scope',
    );
    expectError(await t.call({ method: 'DELETE', url: `${SS}/${smart.id}`, key: reader }), 403, 'insufficient_scope');
    expect((await t.call({ url: `${SS}/${smart.id}`, key: reader })).status).toBe(200);
    expect((await t.call({ url: SS, key: reader })).body.data).toHaveLength(1);
    expect(await externalIds(owner.key, 'guarded')).toEqual([]);
  });
});
