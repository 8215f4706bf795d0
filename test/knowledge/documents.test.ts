// Documents: create, list, full-text search (documents and translations), translations (one per
// language), bulk delete and its addressing rules, searchKnowledge for the agent, tenant isolation.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RELEVANT_RANK, searchKnowledge } from '../../src/domain/knowledge/search.js';
import { expectError, lockWaiters, startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const post = (key: string, url: string, body?: unknown) => t.call({ method: 'POST', url, key, body });
const createDocument = async (key: string, body: Record<string, unknown>) => {
  const created = await post(key, '/api/v1/documents', body);
  if (created.status !== 201) throw new Error(created.text);
  return created.body as { id: string; [k: string]: unknown };
};
const manualSource = async (key: string) => {
  const created = await post(key, '/api/v1/sources', { name: 'faq', source_type: 'manual' });
  return created.body.id as string;
};
const MISSING = '0190a0a0-0000-7000-8000-000000000000';

describe('documents', () => {
  it('creates a document (201) with defaults, reads it back and deletes it', async () => {
    const { key } = await t.tenant();
    const created = await post(key, '/api/v1/documents', { title: 'Refunds', content: 'We refund within 30 days.' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'document',
      title: 'Refunds',
      content: 'We refund within 30 days.',
      language: 'en',
      source_id: null,
      page_id: null,
      url: null,
    });
    expect(created.body.created_at).toMatch(/\.\d{3}Z$/);
    const read = await t.call({ url: `/api/v1/documents/${created.body.id}`, key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
    const deleted = await t.call({ method: 'DELETE', url: `/api/v1/documents/${created.body.id}`, key });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: created.body.id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `/api/v1/documents/${created.body.id}`, key }), 404, 'not_found');
    expectError(await t.call({ method: 'DELETE', url: `/api/v1/documents/${created.body.id}`, key }), 404, 'not_found');
  });

  it('refuses bad document bodies with the field at fault', async () => {
    const { key } = await t.tenant();
    expectError(await post(key, '/api/v1/documents', { content: 'x' }), 422, 'missing_required_parameter', 'title');
    expectError(await post(key, '/api/v1/documents', { title: 'x' }), 422, 'missing_required_parameter', 'content');
    expectError(
      await post(key, '/api/v1/documents', { title: 'x', content: 'y', extra: 1 }),
      422,
      'validation_error',
      'extra',
    );
    expectError(
      await post(key, '/api/v1/documents', { title: 'x', content: 'y', language: 'english!' }),
      422,
      'validation_error',
      'language',
    );
    expectError(await post(key, '/api/v1/documents', { title: 1, content: 'y' }), 422, 'validation_error', 'title');
    expectError(await t.call({ url: '/api/v1/documents/not-a-uuid', key }), 404, 'not_found');
    expect((await t.call({ url: '/api/v1/documents', key })).body.data).toEqual([]);
  });

  it('ties a document to a manual source only, and keeps page_id unique within the source', async () => {
    const { key } = await t.tenant();
    const sourceId = await manualSource(key);
    const website = await post(key, '/api/v1/sources', { name: 'site', source_type: 'website', domain: 'example.com' });
    expectError(
      await post(key, '/api/v1/documents', { title: 'a', content: 'b', source_id: MISSING }),
      422,
      'invalid_parameters',
      'source_id',
    );
    expectError(
      await post(key, '/api/v1/documents', { title: 'a', content: 'b', source_id: website.body.id }),
      422,
      'invalid_parameters',
      'source_id',
    );
    expectError(
      await post(key, '/api/v1/documents', { title: 'a', content: 'b', page_id: '/a' }),
      422,
      'missing_required_parameter',
      'source_id',
    );
    const first = await post(key, '/api/v1/documents', {
      title: 'a',
      content: 'b',
      source_id: sourceId,
      page_id: '/a',
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ source_id: sourceId, page_id: '/a' });
    expectError(
      await post(key, '/api/v1/documents', { title: 'c', content: 'd', source_id: sourceId, page_id: '/a' }),
      409,
      'conflict',
      'page_id',
    );
    // 2,000 characters, but more bytes than an index entry holds: refused naming it, not a database error.
    expectError(
      await post(key, '/api/v1/documents', {
        title: 'e',
        content: 'f',
        source_id: sourceId,
        page_id: '😀'.repeat(501),
      }),
      422,
      'validation_error',
      'page_id',
    );
    const ascii = await post(key, '/api/v1/documents', {
      title: 'g',
      content: 'h',
      source_id: sourceId,
      page_id: `/${'p'.repeat(1999)}`,
    });
    expect(ascii.status).toBe(201);
    const source = await t.call({ url: `/api/v1/sources/${sourceId}`, key });
    expect(source.body.document_count).toBe(2);
  });

  it('lists newest first, filters by source_id and pages with cursors', async () => {
    const { key } = await t.tenant();
    const sourceId = await manualSource(key);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(
        (
          await createDocument(key, {
            title: `doc ${i}`,
            content: `body ${i}`,
            ...(i % 2 === 0 ? { source_id: sourceId } : {}),
          })
        ).id,
      );
    }
    const first = await t.call({ url: '/api/v1/documents?limit=2', key });
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((d: { id: string }) => d.id)).toEqual([ids[4], ids[3]]);
    const rest = await t.call({ url: `/api/v1/documents?limit=10&cursor=${first.body.next_cursor}`, key });
    expect(rest.body.data.map((d: { id: string }) => d.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(rest.body).toMatchObject({ has_more: false, next_cursor: null });
    const bySource = await t.call({ url: `/api/v1/documents?source_id=${sourceId}`, key });
    expect(bySource.body.data.map((d: { id: string }) => d.id)).toEqual([ids[4], ids[2], ids[0]]);
    expectError(await t.call({ url: '/api/v1/documents?cursor=bogus', key }), 422, 'validation_error', 'cursor');
    expectError(await t.call({ url: '/api/v1/documents?limit=101', key }), 422, 'validation_error', 'limit');
  });
});

describe('full-text search', () => {
  it('q ranks by PostgreSQL full-text search: stemmed matches, title above body, with snippet', async () => {
    const { key } = await t.tenant();
    const body = await createDocument(key, {
      title: 'Shipping times',
      content: 'Orders ship in two days. To change your password, open the account page.',
    });
    const title = await createDocument(key, {
      title: 'Resetting your password',
      content: 'Open the login page and follow the link to choose a new one.',
    });
    await createDocument(key, { title: 'Opening hours', content: 'We are open every day from 9 to 5.' });
    const found = await t.call({ url: '/api/v1/documents?q=passwords', key });
    expect(found.status).toBe(200);
    expect(found.body.data.map((d: { id: string }) => d.id)).toEqual([title.id, body.id]);
    const [best, second] = found.body.data;
    expect(best.rank).toBeGreaterThan(second.rank);
    expect(best.rank).toBeGreaterThan(0);
    expect(best.rank).toBeLessThan(1);
    expect(second.snippet).toContain('password');
    // Web-search syntax: every word must match; a quoted phrase; an excluded word.
    expect(
      (await t.call({ url: '/api/v1/documents?q=password%20shipping', key })).body.data.map(
        (d: { id: string }) => d.id,
      ),
    ).toEqual([body.id]);
    expect(
      (await t.call({ url: '/api/v1/documents?q=password%20-shipping', key })).body.data.map(
        (d: { id: string }) => d.id,
      ),
    ).toEqual([title.id]);
    expect((await t.call({ url: '/api/v1/documents?q=nothing%20like%20this', key })).body.data).toEqual([]);
  });

  it('takes a document of 1,000,000 characters of distinct words: search indexes its first 100,000', async () => {
    const { key } = await t.tenant();
    // Five-letter words, each once: about 1.4 MB of words and positions, past PostgreSQL's 1 MiB
    // cap on one search vector.
    const word = (i: number) => {
      let text = '';
      for (let n = i + 26 ** 4; n > 0; n = Math.floor(n / 26)) text += String.fromCharCode(97 + (n % 26));
      return text;
    };
    const words: string[] = [];
    let length = -1;
    for (let i = 0; length + 6 <= 1_000_000; i++) {
      words.push(word(i));
      length += 6;
    }
    const content = words.join(' ');
    const created = await post(key, '/api/v1/documents', { title: 'Glossary', content });
    expect(created.status, created.text).toBe(201);
    expect((await t.call({ url: `/api/v1/documents/${created.body.id}`, key })).body.content).toHaveLength(
      content.length,
    );
    const found = await t.call({ url: `/api/v1/documents?q=${words[100]}`, key });
    expect(found.body.data.map((d: { id: string }) => d.id)).toEqual([created.body.id]);
    const beyond = await t.call({ url: `/api/v1/documents?q=${words[words.length - 1]}`, key });
    expect(beyond.body.data).toEqual([]);
  });

  it('q pages through ranked results with its own cursor', async () => {
    const { key } = await t.tenant();
    for (let i = 0; i < 3; i++)
      await createDocument(key, { title: `Invoice ${i}`, content: `invoice ${'invoice '.repeat(i)}` });
    const first = await t.call({ url: '/api/v1/documents?q=invoice&limit=2', key });
    expect(first.body.data).toHaveLength(2);
    expect(first.body.has_more).toBe(true);
    const second = await t.call({ url: `/api/v1/documents?q=invoice&limit=2&cursor=${first.body.next_cursor}`, key });
    expect(second.body.data).toHaveLength(1);
    expect(second.body.has_more).toBe(false);
    const all = [...first.body.data, ...second.body.data].map((d: { id: string }) => d.id);
    expect(new Set(all).size).toBe(3);
  });

  it('q pages resume after the last result: documents deleted or added between pages skip and repeat nothing', async () => {
    const { key } = await t.tenant();
    // Equal ranks, so the order within them is the id's.
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await createDocument(key, { title: `Note ${i}`, content: 'zebra' })).id);
    const ids_ = (page: { body: { data: { id: string }[] } }) => page.body.data.map((d) => d.id);
    const first = await t.call({ url: '/api/v1/documents?q=zebra&limit=4', key });
    // Two of the first page go, and two new matches come, before the next page is read.
    for (const id of ids_(first).slice(0, 2)) await t.call({ method: 'DELETE', url: `/api/v1/documents/${id}`, key });
    for (let i = 0; i < 2; i++) await createDocument(key, { title: `Late ${i}`, content: 'zebra' });
    const rest: string[] = [];
    let cursor = first.body.next_cursor;
    while (cursor) {
      const page = await t.call({ url: `/api/v1/documents?q=zebra&limit=4&cursor=${cursor}`, key });
      rest.push(...ids_(page));
      cursor = page.body.next_cursor;
    }
    // Every document there from start to end is read once; the newer two sort before the cursor.
    expect([...ids_(first), ...rest].filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());
    expect(new Set(rest).size).toBe(rest.length);
    expect(rest.some((id) => ids_(first).includes(id))).toBe(false);
    expectError(
      await t.call({ url: '/api/v1/documents?q=zebra&cursor=b2Zmc2V0OjQ', key }),
      422,
      'validation_error',
      'cursor',
    );
    // Spaces only name nothing to search for: not the whole list.
    expectError(await t.call({ url: '/api/v1/documents?q=%20', key }), 422, 'validation_error', 'q');
  });

  it('search covers translations in their language', async () => {
    const { key } = await t.tenant();
    const doc = await createDocument(key, { title: 'Delivery', content: 'Parcels are delivered by courier.' });
    await post(key, `/api/v1/documents/${doc.id}/translations`, {
      language: 'fr',
      title: 'Livraison',
      content: 'Les colis sont livrés par coursier.',
      related_questions: 'Quand mon colis arrive-t-il ?',
    });
    const french = await t.call({ url: '/api/v1/documents?q=colis', key });
    expect(french.body.data.map((d: { id: string }) => d.id)).toEqual([doc.id]);
    const english = await t.call({ url: '/api/v1/documents?q=delivered', key });
    expect(english.body.data.map((d: { id: string }) => d.id)).toEqual([doc.id]);
  });

  it('q finds a document by its translation, with the snippet taken from the translation that matched', async () => {
    const { key } = await t.tenant();
    const doc = await createDocument(key, {
      title: 'Refund policy',
      content: 'Refunds are processed within 14 days of receiving the returned item.',
    });
    await post(key, `/api/v1/documents/${doc.id}/translations`, {
      language: 'fr',
      title: 'Politique de remboursement',
      content: 'Les remboursements sont traités sous 14 jours.',
      related_questions: '',
    });
    const found = await t.call({ url: '/api/v1/documents?q=remboursements', key });
    expect(found.body.data.map((d: { id: string }) => d.id)).toEqual([doc.id]);
    expect(found.body.data[0].snippet).toMatch(/remboursements/);
    // Matched in its own text, the snippet is the document's.
    const own = await t.call({ url: '/api/v1/documents?q=refunds', key });
    expect(own.body.data[0].snippet).toMatch(/Refunds/);
  });

  it('searchKnowledge returns one passage per document, in the asked language where a translation exists', async () => {
    const { key, tenantId } = await t.tenant();
    const doc = await createDocument(key, {
      title: 'Reset your password',
      content: 'To reset your password, open Settings, then Security, and choose Reset password.',
    });
    await post(key, `/api/v1/documents/${doc.id}/translations`, {
      language: 'fr',
      title: 'Réinitialiser votre mot de passe',
      content: 'Pour réinitialiser votre mot de passe, ouvrez Réglages, puis Sécurité.',
      related_questions: 'Comment changer mon mot de passe ?',
    });
    const other = await createDocument(key, {
      title: 'Billing',
      content: 'Invoices are sent monthly. Passwords are never sent by e-mail.',
    });

    const english = await searchKnowledge(t.database.db, tenantId, 'How do I reset my password?');
    expect(english.map((p) => p.document_id)).toEqual([doc.id, other.id]);
    expect(english[0]).toMatchObject({ title: 'Reset your password', language: 'en', source_id: null });
    expect(english[0]?.rank).toBeGreaterThanOrEqual(RELEVANT_RANK);
    // The billing page holds one of the question's two words, the rarer one not: it ranks well below.
    expect(english[1]?.rank).toBeLessThan((english[0]?.rank ?? 0) / 2);
    expect(english[0]?.snippet).toMatch(/reset/i);
    expect(english[0]?.content).toContain('Settings');

    const french = await searchKnowledge(t.database.db, tenantId, 'Comment réinitialiser mon mot de passe ?', {
      language: 'fr',
    });
    expect(french[0]).toMatchObject({ document_id: doc.id, language: 'fr', title: 'Réinitialiser votre mot de passe' });
    expect(french[0]?.rank).toBeGreaterThan(0);

    // Asked in English by a French-speaking conversation: the French passage is the one returned.
    const preferred = await searchKnowledge(t.database.db, tenantId, 'reset password', { language: 'fr-CA' });
    expect(preferred[0]).toMatchObject({ document_id: doc.id, language: 'fr' });
    // No translation in the asked language: the document itself.
    const fallback = await searchKnowledge(t.database.db, tenantId, 'reset password', { language: 'de', limit: 1 });
    expect(fallback).toHaveLength(1);
    expect(fallback[0]).toMatchObject({ document_id: doc.id, language: 'en' });

    expect(await searchKnowledge(t.database.db, tenantId, '???')).toEqual([]);
    const stranger = await t.tenant();
    expect(await searchKnowledge(t.database.db, stranger.tenantId, 'reset password')).toEqual([]);
  });
});

describe('translations', () => {
  // PostgreSQL only: the delete is held open in a second session while the translation is added.
  it.runIf(usingPostgres)('a translation added while its document is deleted answers 404, not a 422', async () => {
    const { key } = await t.tenant();
    const doc = await createDocument(key, { title: 'Going', content: 'Soon gone.' });
    await t.database.db.connection().execute(async (session) => {
      await sql`begin`.execute(session);
      await sql`delete from documents where id = ${doc.id}`.execute(session);
      // The translation reads the document (the delete is not committed), then its insert waits.
      const adding = post(key, `/api/v1/documents/${doc.id}/translations`, {
        language: 'fr',
        title: 'Partant',
        content: 'Bientôt parti.',
      });
      expect(await lockWaiters(session, sql`locktype = 'transactionid'`)).toBe(1);
      await sql`commit`.execute(session);
      expectError(await adding, 404, 'not_found');
    });
  });

  it('adds a translation (201, the spec shape), one per language, listed per document', async () => {
    const { key } = await t.tenant();
    const doc = await createDocument(key, { title: 'Returns', content: 'Return within 30 days.' });
    const body = {
      language: 'DE',
      title: 'Rücksendungen',
      content: 'Rücksendung innerhalb von 30 Tagen.',
      related_questions: 'Wie sende ich zurück?',
    };
    const created = await post(key, `/api/v1/documents/${doc.id}/translations`, body);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'translation',
      document_id: doc.id,
      language: 'de',
      title: 'Rücksendungen',
      content: 'Rücksendung innerhalb von 30 Tagen.',
      related_questions: 'Wie sende ich zurück?',
    });
    for (const field of ['id', 'created_at', 'updated_at']) expect(typeof created.body[field]).toBe('string');
    expectError(
      await post(key, `/api/v1/documents/${doc.id}/translations`, { ...body, language: 'de' }),
      409,
      'conflict',
      'language',
    );
    expectError(
      await post(key, `/api/v1/documents/${doc.id}/translations`, { ...body, language: 'en' }),
      409,
      'conflict',
      'language',
    );
    expectError(await post(key, `/api/v1/documents/${MISSING}/translations`, body), 404, 'not_found');
    expectError(
      await post(key, `/api/v1/documents/${doc.id}/translations`, { title: 'x', content: 'y' }),
      422,
      'missing_required_parameter',
      'language',
    );
    const list = await t.call({ url: `/api/v1/documents/${doc.id}/translations`, key });
    expect(list.body.data.map((tr: { language: string }) => tr.language)).toEqual(['de']);
    expectError(await t.call({ url: `/api/v1/documents/${MISSING}/translations`, key }), 404, 'not_found');
  });
});

describe('bulk delete', () => {
  it('deletes by document_ids and counts only what existed', async () => {
    const { key } = await t.tenant();
    const a = await createDocument(key, { title: 'a', content: 'a' });
    const b = await createDocument(key, { title: 'b', content: 'b' });
    const c = await createDocument(key, { title: 'c', content: 'c' });
    const result = await post(key, '/api/v1/documents/bulk-delete', { document_ids: [a.id, b.id, b.id, MISSING] });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ object: 'bulk_delete', deleted_count: 2 });
    const left = await t.call({ url: '/api/v1/documents', key });
    expect(left.body.data.map((d: { id: string }) => d.id)).toEqual([c.id]);
  });

  it('deletes by source_id with page_ids', async () => {
    const { key } = await t.tenant();
    const sourceId = await manualSource(key);
    for (const page of ['/a', '/b', '/c'])
      await createDocument(key, { title: page, content: page, source_id: sourceId, page_id: page });
    const result = await post(key, '/api/v1/documents/bulk-delete', {
      source_id: sourceId,
      page_ids: ['/a', '/c', '/zzz'],
    });
    expect(result.body).toEqual({ object: 'bulk_delete', deleted_count: 2 });
    const left = await t.call({ url: `/api/v1/documents?source_id=${sourceId}`, key });
    expect(left.body.data.map((d: { page_id: string }) => d.page_id)).toEqual(['/b']);
  });

  it('refuses ambiguous, missing, empty and oversized addressing with 422', async () => {
    const { key } = await t.tenant();
    const sourceId = await manualSource(key);
    const doc = await createDocument(key, { title: 'keep', content: 'keep', source_id: sourceId, page_id: '/keep' });
    const url = '/api/v1/documents/bulk-delete';
    expectError(
      await post(key, url, { document_ids: [doc.id], source_id: sourceId, page_ids: ['/keep'] }),
      422,
      'ambiguous_addressing',
      'document_ids',
    );
    expectError(
      await post(key, url, { document_ids: [doc.id], source_id: sourceId }),
      422,
      'ambiguous_addressing',
      'document_ids',
    );
    expectError(await post(key, url, {}), 422, 'missing_required_parameter', 'document_ids');
    expectError(await post(key, url, { source_id: sourceId }), 422, 'missing_required_parameter', 'page_ids');
    expectError(await post(key, url, { page_ids: ['/keep'] }), 422, 'missing_required_parameter', 'source_id');
    expectError(await post(key, url, { document_ids: [] }), 422, 'empty_items', 'document_ids');
    expectError(await post(key, url, { source_id: sourceId, page_ids: [] }), 422, 'empty_items', 'page_ids');
    const ids = Array.from({ length: 101 }, () => doc.id);
    expectError(await post(key, url, { document_ids: ids }), 422, 'too_many_items', 'document_ids');
    expectError(
      await post(key, url, { source_id: sourceId, page_ids: ids.map((_, i) => `/p${i}`) }),
      422,
      'too_many_items',
      'page_ids',
    );
    expectError(await post(key, url, { document_ids: ['nope'] }), 422, 'validation_error', 'document_ids[0]');
    expectError(
      await post(key, url, { source_id: MISSING, page_ids: ['/keep'] }),
      422,
      'invalid_parameters',
      'source_id',
    );
    // Nothing was deleted by any refused request.
    expect((await t.call({ url: `/api/v1/documents/${doc.id}`, key })).status).toBe(200);
    // Exactly 100 is allowed.
    const hundred = await post(key, url, { document_ids: Array.from({ length: 100 }, () => doc.id) });
    expect(hundred.body).toEqual({ object: 'bulk_delete', deleted_count: 1 });
  });
});

describe('access', () => {
  it('needs knowledge:write to change and knowledge:read to read', async () => {
    const { tenantId, key } = await t.tenant(['knowledge:write']);
    const doc = await createDocument(key, { title: 'x', content: 'y' });
    const reader = await t.key(tenantId, ['knowledge:read']);
    expect((await t.call({ url: `/api/v1/documents/${doc.id}`, key: reader })).status).toBe(200);
    expectError(await post(reader, '/api/v1/documents', { title: 'x', content: 'y' }), 403, 'insufficient_scope');
    expectError(
      await post(reader, '/api/v1/documents/bulk-delete', { document_ids: [doc.id] }),
      403,
      'insufficient_scope',
    );
    const other = await t.key(tenantId, ['apps:read']);
    expectError(await t.call({ url: '/api/v1/documents', key: other }), 403, 'insufficient_scope');
  });

  it("another tenant's key gets 404 on every document id and deletes nothing in bulk", async () => {
    const owner = await t.tenant();
    const stranger = await t.tenant();
    const sourceId = await manualSource(owner.key);
    const doc = await createDocument(owner.key, {
      title: 'secret',
      content: 'secret',
      source_id: sourceId,
      page_id: '/s',
    });
    const tr = { language: 'fr', title: 'x', content: 'y' };
    expectError(await t.call({ url: `/api/v1/documents/${doc.id}`, key: stranger.key }), 404, 'not_found');
    expectError(
      await t.call({ method: 'DELETE', url: `/api/v1/documents/${doc.id}`, key: stranger.key }),
      404,
      'not_found',
    );
    expectError(await post(stranger.key, `/api/v1/documents/${doc.id}/translations`, tr), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/documents/${doc.id}/translations`, key: stranger.key }), 404, 'not_found');
    const bulk = await post(stranger.key, '/api/v1/documents/bulk-delete', { document_ids: [doc.id] });
    expect(bulk.body.deleted_count).toBe(0);
    expectError(
      await post(stranger.key, '/api/v1/documents/bulk-delete', { source_id: sourceId, page_ids: ['/s'] }),
      422,
      'invalid_parameters',
      'source_id',
    );
    expectError(
      await post(stranger.key, '/api/v1/documents', { title: 'x', content: 'y', source_id: sourceId }),
      422,
      'invalid_parameters',
      'source_id',
    );
    expect((await t.call({ url: '/api/v1/documents?q=secret', key: stranger.key })).body.data).toEqual([]);
    expect((await t.call({ url: `/api/v1/documents/${doc.id}`, key: owner.key })).status).toBe(200);
  });
});
