// Knowledge update requests (knowledge gaps): recorded by the agent, listed, reviewed, resolved
// and applied as documents; transitions outside the documented ones are 409 conflicts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const BASE = '/api/v1/knowledge-update-requests';
const CONVERSATION = '0190a0a0-0000-7000-8000-00000000c0c0';
const MESSAGE = '0190a0a0-0000-7000-8000-00000000beef';
const MISSING = '0190a0a0-0000-7000-8000-000000000000';
const post = (key: string, url: string, body?: unknown) => t.call({ method: 'POST', url, key, body });
const gap = (tenantId: string, question: string, extra: Record<string, unknown> = {}) =>
  t.services.knowledgeGaps.recordGap(tenantId, { question, ...extra });

describe('recording gaps', () => {
  it('recordGap opens a request; the same question again counts an occurrence', async () => {
    const { tenantId, key } = await t.tenant();
    const first = await gap(tenantId, 'Do you ship to Iceland?', {
      conversation_id: CONVERSATION,
      message_id: MESSAGE,
    });
    expect(first).toMatchObject({
      object: 'knowledge_update_request',
      question: 'Do you ship to Iceland?',
      status: 'open',
      occurrences: 1,
      conversation_id: CONVERSATION,
      message_id: MESSAGE,
      proposed_answer: null,
      review_note: null,
      document_id: null,
      reviewed_at: null,
    });
    const again = await gap(tenantId, '  do you  SHIP to iceland? ');
    expect(again).toMatchObject({ id: first.id, occurrences: 2 });
    const other = await gap(tenantId, 'Can I pay by invoice?', { proposed_answer: 'Yes, for companies.' });
    expect(other.id).not.toBe(first.id);
    expect(other.proposed_answer).toBe('Yes, for companies.');

    const list = await t.call({ url: BASE, key });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ object: 'list', has_more: false });
    expect(list.body.data.map((r: { id: string }) => r.id)).toEqual([other.id, first.id]);
    const read = await t.call({ url: `${BASE}/${first.id}`, key });
    expect(read.body).toMatchObject({ id: first.id, occurrences: 2, status: 'open' });
    expectError(await t.call({ url: `${BASE}/${MISSING}`, key }), 404, 'not_found');
    expectError(await t.call({ url: `${BASE}?status=closed`, key }), 422, 'validation_error', 'status');
  });

  it('the same question asked in many conversations at once makes one request counting every asking', async () => {
    const { tenantId, key } = await t.tenant();
    const asked = await Promise.all(
      Array.from({ length: 20 }, () =>
        gap(tenantId, 'Do you ship to the Faroe Islands?', { conversation_id: CONVERSATION }),
      ),
    );
    expect(new Set(asked.map((request) => request.id)).size).toBe(1);
    const list = await t.call({ url: BASE, key });
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0].occurrences).toBe(20);
  });
});

describe('transitions', () => {
  it('open → approved → applied: the answer becomes a new, searchable document', async () => {
    const { tenantId, key } = await t.tenant();
    const request = await gap(tenantId, 'Do you ship to Iceland?');
    const approved = await post(key, `${BASE}/${request.id}/review`, {
      decision: 'approve',
      note: 'Confirmed with logistics',
      proposed_answer: 'Yes, we ship to Iceland within 5 days.',
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({
      status: 'approved',
      review_note: 'Confirmed with logistics',
      proposed_answer: 'Yes, we ship to Iceland within 5 days.',
    });
    expect(approved.body.reviewed_at).toMatch(/Z$/);
    expectError(await post(key, `${BASE}/${request.id}/review`, { decision: 'reject' }), 409, 'conflict');

    const applied = await post(key, `${BASE}/${request.id}/apply`, {});
    expect(applied.status).toBe(200);
    expect(applied.body).toMatchObject({ status: 'applied' });
    expect(applied.body.applied_at).toMatch(/Z$/);
    const doc = await t.call({ url: `/api/v1/documents/${applied.body.document_id}`, key });
    expect(doc.body).toMatchObject({
      title: 'Do you ship to Iceland?',
      content: 'Yes, we ship to Iceland within 5 days.',
    });
    const found = await t.call({ url: '/api/v1/documents?q=iceland', key });
    expect(found.body.data.map((d: { id: string }) => d.id)).toEqual([applied.body.document_id]);

    // applied is final
    expectError(await post(key, `${BASE}/${request.id}/apply`, {}), 409, 'conflict');
    expectError(await post(key, `${BASE}/${request.id}/resolve`), 409, 'conflict');
    expect((await t.call({ url: `${BASE}?status=applied`, key })).body.data.map((r: { id: string }) => r.id)).toEqual([
      request.id,
    ]);
    expect((await t.call({ url: `${BASE}?status=open`, key })).body.data).toEqual([]);
  });

  it('apply appends to an existing document as a section headed by the question', async () => {
    const { tenantId, key } = await t.tenant();
    const faq = await post(key, '/api/v1/documents', { title: 'Shipping FAQ', content: 'We ship worldwide.' });
    const request = await gap(tenantId, 'How long does shipping to Japan take?');
    await post(key, `${BASE}/${request.id}/review`, { decision: 'approve' });
    expectError(
      await post(key, `${BASE}/${request.id}/apply`, {}),
      422,
      'missing_required_parameter',
      'proposed_answer',
    );
    expectError(
      await post(key, `${BASE}/${request.id}/apply`, { proposed_answer: 'x', document_id: MISSING }),
      422,
      'invalid_parameters',
      'document_id',
    );
    expectError(
      await post(key, `${BASE}/${request.id}/apply`, { proposed_answer: '   ', document_id: faq.body.id }),
      422,
      'validation_error',
      'proposed_answer',
    );
    // Nothing changed by the refused attempts.
    expect((await t.call({ url: `${BASE}/${request.id}`, key })).body.status).toBe('approved');
    const applied = await post(key, `${BASE}/${request.id}/apply`, {
      proposed_answer: 'About 7 days.',
      document_id: faq.body.id,
    });
    expect(applied.body).toMatchObject({
      status: 'applied',
      document_id: faq.body.id,
      proposed_answer: 'About 7 days.',
    });
    const doc = await t.call({ url: `/api/v1/documents/${faq.body.id}`, key });
    expect(doc.body.content).toBe('We ship worldwide.\n\n## How long does shipping to Japan take?\n\nAbout 7 days.');
    expect(doc.body.updated_at > faq.body.updated_at).toBe(true);
  });

  it('apply refuses a document the answer would not be found in: past the first 100,000 characters', async () => {
    const { tenantId, key } = await t.tenant();
    // Search reads a body's first 100,000 characters: a section after them would never be found.
    const long = await post(key, '/api/v1/documents', { title: 'Long', content: 'word '.repeat(20_000) });
    const nearFull = await post(key, '/api/v1/documents', { title: 'Near full', content: 'a'.repeat(99_000) });
    // Room for the heading's start, not for the answer: refused too.
    const edge = await post(key, '/api/v1/documents', { title: 'Edge', content: 'a'.repeat(99_990) });
    const request = await gap(tenantId, 'Do you sell zebra stripes wholesale?');
    await post(key, `${BASE}/${request.id}/review`, { decision: 'approve', proposed_answer: 'Yes, by the metre.' });
    const refused = await post(key, `${BASE}/${request.id}/apply`, { document_id: long.body.id });
    expectError(refused, 422, 'invalid_parameters', 'document_id');
    expect(refused.body.error.message).toContain('first 100,000 characters');
    expectError(
      await post(key, `${BASE}/${request.id}/apply`, { document_id: edge.body.id }),
      422,
      'invalid_parameters',
      'document_id',
    );
    expect((await t.call({ url: `/api/v1/documents/${long.body.id}`, key })).body.content).toHaveLength(100_000);
    // Just inside the indexed part, the section is written and found.
    const applied = await post(key, `${BASE}/${request.id}/apply`, { document_id: nearFull.body.id });
    expect(applied.body.status).toBe('applied');
    const found = await t.call({ url: '/api/v1/documents?q=zebra%20stripes%20wholesale', key });
    expect(found.body.data.map((d: { id: string }) => d.id)).toEqual([nearFull.body.id]);
  });

  it('open → rejected → resolved; resolved is final; apply needs approved', async () => {
    const { tenantId, key } = await t.tenant();
    const request = await gap(tenantId, 'What is the meaning of life?');
    const rejected = await post(key, `${BASE}/${request.id}/review`, { decision: 'reject', note: 'Out of scope' });
    expect(rejected.body).toMatchObject({ status: 'rejected', review_note: 'Out of scope' });
    expectError(await post(key, `${BASE}/${request.id}/apply`, { proposed_answer: '42' }), 409, 'conflict');
    const resolved = await post(key, `${BASE}/${request.id}/resolve`);
    expect(resolved.body.status).toBe('resolved');
    expect(resolved.body.resolved_at).toMatch(/Z$/);
    expectError(await post(key, `${BASE}/${request.id}/resolve`), 409, 'conflict');
    expectError(await post(key, `${BASE}/${request.id}/review`, { decision: 'approve' }), 409, 'conflict');

    const open = await gap(tenantId, 'Another question?');
    expectError(await post(key, `${BASE}/${open.id}/apply`, { proposed_answer: 'x' }), 409, 'conflict');
    expect((await post(key, `${BASE}/${open.id}/resolve`)).body.status).toBe('resolved');
    // A resolved request no longer collects occurrences: the question opens a new one.
    expect((await gap(tenantId, 'Another question?')).id).not.toBe(open.id);
  });

  it('refuses a website page as the document to append to', async () => {
    const { tenantId, key } = await t.tenant();
    const source = await post(key, '/api/v1/sources', { name: 'site', source_type: 'website', domain: 'example.com' });
    const { rows } = await t.database.db
      .insertInto('documents')
      .values({
        id: '0190a0a0-0000-7000-8000-0000000000aa',
        tenant_id: tenantId,
        source_id: source.body.id,
        page_id: '/faq',
        title: 'FAQ',
        content: 'Crawled.',
        language: 'en',
        search_config: 'english',
        content_hash: 'x',
      })
      .returning('id')
      .execute()
      .then((r) => ({ rows: r }));
    const request = await gap(tenantId, 'Is there a warranty?');
    await post(key, `${BASE}/${request.id}/review`, { decision: 'approve', proposed_answer: 'Two years.' });
    expectError(
      await post(key, `${BASE}/${request.id}/apply`, { document_id: rows[0]?.id }),
      422,
      'invalid_parameters',
      'document_id',
    );
  });

  it('validates review and apply bodies', async () => {
    const { tenantId, key } = await t.tenant();
    const request = await gap(tenantId, 'Q?');
    expectError(await post(key, `${BASE}/${request.id}/review`, {}), 422, 'missing_required_parameter', 'decision');
    expectError(
      await post(key, `${BASE}/${request.id}/review`, { decision: 'maybe' }),
      422,
      'validation_error',
      'decision',
    );
    expectError(
      await post(key, `${BASE}/${request.id}/review`, { decision: 'approve', extra: 1 }),
      422,
      'validation_error',
      'extra',
    );
    expectError(
      await post(key, `${BASE}/${request.id}/apply`, { document_id: 'nope' }),
      422,
      'validation_error',
      'document_id',
    );
    expectError(await post(key, `${BASE}/not-a-uuid/review`, { decision: 'approve' }), 404, 'not_found');
    expect((await t.call({ url: `${BASE}/${request.id}`, key })).body.status).toBe('open');
  });
});

describe('access', () => {
  it("another tenant's key gets 404 on every request id", async () => {
    const owner = await t.tenant();
    const stranger = await t.tenant();
    const request = await gap(owner.tenantId, 'Private question?');
    const k = stranger.key;
    expectError(await t.call({ url: `${BASE}/${request.id}`, key: k }), 404, 'not_found');
    expectError(await post(k, `${BASE}/${request.id}/review`, { decision: 'approve' }), 404, 'not_found');
    expectError(await post(k, `${BASE}/${request.id}/resolve`), 404, 'not_found');
    expectError(await post(k, `${BASE}/${request.id}/apply`, { proposed_answer: 'x' }), 404, 'not_found');
    expect((await t.call({ url: BASE, key: k })).body.data).toEqual([]);
    expect((await t.call({ url: `${BASE}/${request.id}`, key: owner.key })).body.status).toBe('open');
  });

  it('reading needs knowledge:read, reviewing knowledge:write', async () => {
    const { tenantId } = await t.tenant(['apps:read']);
    const request = await gap(tenantId, 'Scoped?');
    const none = await t.key(tenantId, ['apps:read']);
    const reader = await t.key(tenantId, ['knowledge:read']);
    expectError(await t.call({ url: BASE, key: none }), 403, 'insufficient_scope');
    expect((await t.call({ url: `${BASE}/${request.id}`, key: reader })).status).toBe(200);
    expectError(await post(reader, `${BASE}/${request.id}/review`, { decision: 'approve' }), 403, 'insufficient_scope');
    expectError(await post(reader, `${BASE}/${request.id}/resolve`), 403, 'insufficient_scope');
  });
});
