// Sources: CRUD, Update Source (spec), Sync Source (202, queued on the job queue, one at a time),
// the website connector against a small site served by a local HTTP server (sitemap or links,
// same host only, robots.txt, changed and vanished pages), manual sources, auto-sync, the SSRF
// guard, and tenant isolation.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crawlWebsite, extractPage } from '../../src/domain/knowledge/website-connector.js';
import { isPublicAddress, safeRequest } from '../../src/lib/ssrf.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

/** A tiny website whose pages tests change between syncs; it records every request. */
class Site {
  pages = new Map<
    string,
    { status?: number; type?: string; body: string | Buffer; headers?: Record<string, string> }
  >();
  requests: { host: string; path: string }[] = [];
  gate: Promise<void> | undefined;
  server = http.createServer(async (req, res) => {
    const path = req.url ?? '/';
    this.requests.push({ host: req.headers.host ?? '', path });
    if (path === '/slow' && this.gate) await this.gate;
    const page = this.pages.get(path);
    if (!page) {
      res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not found</h1>');
      return;
    }
    res.writeHead(page.status ?? 200, { 'content-type': page.type ?? 'text/html; charset=utf-8', ...page.headers });
    res.end(page.body);
  });
  port = 0;
  async start() {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }
  get origin() {
    return `http://127.0.0.1:${this.port}`;
  }
  html(path: string, body: string, lang = 'en') {
    this.pages.set(path, { body: `<!doctype html><html lang="${lang}">${body}</html>` });
  }
  fetched(path: string) {
    return this.requests.some((r) => r.path === path);
  }
  close() {
    this.server.closeAllConnections();
    return new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

let t: TestApp;
let key: string;
const sites: Site[] = [];
const newSite = async () => {
  const site = await new Site().start();
  sites.push(site);
  return site;
};

beforeAll(async () => {
  t = await startTestApp({ ALLOW_PRIVATE_TARGETS: 'true' });
  ({ key } = await t.tenant());
});
afterAll(async () => {
  await Promise.all(sites.map((s) => s.close()));
  await t.close();
});

const post = (url: string, body?: unknown, k = key) => t.call({ method: 'POST', url, key: k, body });
const createSource = async (body: Record<string, unknown>, k = key) => {
  const created = await post('/api/v1/sources', body, k);
  if (created.status !== 201) throw new Error(created.text);
  return created.body as { id: string; [field: string]: unknown };
};
const getSource = async (id: string, k = key) => (await t.call({ url: `/api/v1/sources/${id}`, key: k })).body;
const documentsOf = async (sourceId: string, k = key) => {
  const list = await t.call({ url: `/api/v1/documents?source_id=${sourceId}&limit=100`, key: k });
  return (list.body.data as { page_id: string; [field: string]: unknown }[]).sort((a, b) =>
    a.page_id.localeCompare(b.page_id),
  );
};
const syncJobs = (sourceId: string) =>
  t.database.db
    .selectFrom('jobs')
    .select(['id', 'status'])
    .where('dedupe_key', '=', `source-sync:${sourceId}`)
    .execute();
const MISSING = '0190a0a0-0000-7000-8000-000000000000';

/** A site whose second page, `/slow`, answers only once `release` is called. */
async function slowSite() {
  const site = await newSite();
  let release!: () => void;
  site.gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  site.html('/', '<body><a href="/slow">slow</a><p>Start.</p></body>');
  site.html('/slow', '<body><p>Slow page.</p></body>');
  return { site, release };
}

/** The link-following site: a home page linking to pages, a disallowed path and other hosts. */
async function linkedSite() {
  const site = await newSite();
  site.pages.set('/robots.txt', { type: 'text/plain', body: 'User-agent: *\nDisallow: /private\n' });
  site.html(
    '/',
    `<head><title>Home</title></head><body>
       <nav><a href="/about">About</a> <a href="/changing">Changing</a></nav>
       <main><h1>Welcome</h1><p>Our help center.</p>
         <a href="/gone">Old page</a> <a href="/private/secret">Secret</a>
         <a href="http://localhost:${site.port}/elsewhere">Another host</a>
         <a href="/logo.png">Logo</a> <a href="mailto:help@example.com">Mail</a> <a href="#top">Top</a>
         <a href="/redirect-out">Moved</a>
       </main></body>`,
  );
  site.html(
    '/about',
    `<head><title>About us</title><script>var tracking = "SCRIPT-TEXT";</script><style>.x{}</style></head>
     <body><header><p>HEADER-TEXT</p></header><nav>NAV-TEXT</nav>
       <main><article><header><h1>Qui sommes-nous</h1></header><p>Nous aidons nos clients.</p><p>Depuis 2010.</p></article></main>
       <footer>FOOTER-TEXT</footer></body>`,
    'fr',
  );
  site.html('/changing', '<head><title>Changing</title></head><body><p>Version one of the page.</p></body>');
  site.html('/gone', '<head><title>Gone soon</title></head><body><p>This page will disappear.</p></body>');
  site.html('/private/secret', '<body><p>Disallowed by robots.txt</p></body>');
  site.pages.set('/redirect-out', { status: 302, body: '', headers: { location: `http://localhost:${site.port}/x` } });
  return site;
}

/** A website source over `linkedSite()`, synced once: its four pages are documents. */
async function syncedSite(name: string) {
  const site = await linkedSite();
  const source = await createSource({ name, source_type: 'website', domain: site.origin });
  await post(`/api/v1/sources/${source.id}/sync`);
  await t.jobs.runUntilIdle();
  const synced = await getSource(source.id);
  expect(synced.document_count).toBe(4);
  return { site, source, synced };
}

describe('sources', () => {
  it('creates website and manual sources (201) in the spec shape, never synced', async () => {
    const created = await post('/api/v1/sources', {
      name: 'Help center',
      source_type: 'website',
      domain: 'help.example.com',
      source_id: 'hc-1',
      additional_info: { team: 'support' },
      auto_sync_enabled: true,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'source',
      name: 'Help center',
      source_type: 'website',
      source_id: 'hc-1',
      domain: 'help.example.com',
      additional_info: { team: 'support' },
      sync_status: 'never_synced',
      sync_error: null,
      auto_sync_enabled: true,
      last_synced_at: null,
      document_count: 0,
    });
    for (const field of ['id', 'created_at', 'updated_at']) expect(typeof created.body[field]).toBe('string');
    const manual = await createSource({ name: 'FAQ', source_type: 'manual' });
    expect(manual).toMatchObject({ source_type: 'manual', domain: null, source_id: null, auto_sync_enabled: false });
    const list = await t.call({ url: '/api/v1/sources', key });
    expect(list.body.object).toBe('list');
    expect(list.body.data.map((s: { id: string }) => s.id).slice(0, 2)).toEqual([manual.id, created.body.id]);
  });

  it('refuses bad source bodies with the field at fault', async () => {
    expectError(await post('/api/v1/sources', { source_type: 'manual' }), 422, 'missing_required_parameter', 'name');
    expectError(await post('/api/v1/sources', { name: 'x' }), 422, 'missing_required_parameter', 'source_type');
    expectError(
      await post('/api/v1/sources', { name: 'x', source_type: 'ftp' }),
      422,
      'validation_error',
      'source_type',
    );
    expectError(
      await post('/api/v1/sources', { name: 'x', source_type: 'website' }),
      422,
      'missing_required_parameter',
      'domain',
    );
    expectError(
      await post('/api/v1/sources', { name: 'x', source_type: 'website', domain: 'ftp://x.com' }),
      422,
      'validation_error',
      'domain',
    );
    expectError(
      await post('/api/v1/sources', { name: 'x', source_type: 'website', domain: 'http://' }),
      422,
      'validation_error',
      'domain',
    );
    expectError(
      await post('/api/v1/sources', { name: 'x', source_type: 'manual', auto_sync_enabled: 'yes' }),
      422,
      'validation_error',
      'auto_sync_enabled',
    );
    expectError(
      await post('/api/v1/sources', { name: 'x', source_type: 'manual', color: 'red' }),
      422,
      'validation_error',
      'color',
    );
  });

  it('Update Source changes the fields sent and returns the source record', async () => {
    const source = await createSource({ name: 'Old', source_type: 'website', domain: 'old.example.com' });
    const updated = await t.call({
      method: 'PUT',
      url: `/api/v1/sources/${source.id}`,
      key,
      body: {
        name: 'New',
        domain: 'https://new.example.com/help',
        auto_sync_enabled: true,
        source_id: 'ext-9',
        additional_info: { a: 1 },
      },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      id: source.id,
      object: 'source',
      name: 'New',
      domain: 'https://new.example.com/help',
      auto_sync_enabled: true,
      source_id: 'ext-9',
      additional_info: { a: 1 },
      source_type: 'website',
    });
    expect(updated.body.updated_at >= (source.updated_at as string)).toBe(true);
    const flag = await t.call({
      method: 'PUT',
      url: `/api/v1/sources/${source.id}`,
      key,
      body: { auto_sync_enabled: false },
    });
    expect(flag.body).toMatchObject({ auto_sync_enabled: false, name: 'New' });
    expect(await getSource(source.id)).toMatchObject({ auto_sync_enabled: false, name: 'New' });
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/sources/${source.id}`, key, body: { domain: 'nope://x' } }),
      422,
      'validation_error',
      'domain',
    );
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/sources/${source.id}`, key, body: { source_type: 'manual' } }),
      422,
      'validation_error',
      'source_type',
    );
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/sources/${source.id}`, key, body: { auto_sync_enabled: 1 } }),
      422,
      'validation_error',
      'auto_sync_enabled',
    );
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/sources/${MISSING}`, key, body: { name: 'x' } }),
      404,
      'not_found',
    );
  });

  it('deleting a source deletes its documents', async () => {
    const source = await createSource({ name: 'FAQ', source_type: 'manual' });
    const doc = await post('/api/v1/documents', { title: 'Q', content: 'A', source_id: source.id });
    const deleted = await t.call({ method: 'DELETE', url: `/api/v1/sources/${source.id}`, key });
    expect(deleted.body).toEqual({ id: source.id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `/api/v1/sources/${source.id}`, key }), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/documents/${doc.body.id}`, key }), 404, 'not_found');
    expectError(await t.call({ method: 'DELETE', url: `/api/v1/sources/${source.id}`, key }), 404, 'not_found');
  });
});

describe('website sync', () => {
  it("an answer from a synced page cites the page's URL; one from a document written through the API has none", async () => {
    const { key: own } = await t.tenant();
    const site = await linkedSite();
    const source = await createSource({ name: 'Cited', source_type: 'website', domain: site.origin }, own);
    await post(`/api/v1/sources/${source.id}/sync`, undefined, own);
    await t.jobs.runUntilIdle();
    await post('/api/v1/documents', { title: 'Refund policy', content: 'Refunds are paid within five days.' }, own);
    const ask = async (content: string) => {
      const answer = await post('/api/v1/messages', { content }, own);
      expect(answer.status, answer.text).toBe(200);
      return answer.body.citations as { title: string; url: string | null }[];
    };
    expect(await ask('Which version of the page is it?')).toEqual([
      expect.objectContaining({ title: 'Changing', url: `${site.origin}/changing` }),
    ]);
    expect(await ask('When are refunds paid?')).toEqual([
      expect.objectContaining({ title: 'Refund policy', url: null }),
    ]);
  });

  it('crawls by links: same host, robots.txt respected, main text only; then updates changed and removes vanished pages', async () => {
    const site = await linkedSite();
    const source = await createSource({ name: 'Site', source_type: 'website', domain: site.origin });

    const ack = await post(`/api/v1/sources/${source.id}/sync`);
    expect(ack.status).toBe(202);
    expect(ack.body).toEqual({ object: 'sync', status: 'pending', source_id: source.id });
    expect((await getSource(source.id)).sync_status).toBe('pending');
    // A second request while one is queued starts nothing new.
    const again = await post(`/api/v1/sources/${source.id}/sync`);
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ object: 'sync', status: 'pending', source_id: source.id });
    expect(await syncJobs(source.id)).toHaveLength(1);

    await t.jobs.runUntilIdle();
    const synced = await getSource(source.id);
    expect(synced).toMatchObject({ sync_status: 'synced', sync_error: null, document_count: 4 });
    expect(Date.parse(synced.last_synced_at)).toBeGreaterThan(Date.now() - 60_000);

    let docs = await documentsOf(source.id);
    expect(docs.map((d) => d.page_id)).toEqual(['/', '/about', '/changing', '/gone']);
    const about = docs.find((d) => d.page_id === '/about');
    expect(about).toMatchObject({
      title: 'About us',
      language: 'fr',
      url: `${site.origin}/about`,
      source_id: source.id,
    });
    expect(about?.content).toBe('Qui sommes-nous\nNous aidons nos clients.\nDepuis 2010.');
    for (const noise of ['SCRIPT-TEXT', 'HEADER-TEXT', 'NAV-TEXT', 'FOOTER-TEXT'])
      expect(about?.content).not.toContain(noise);
    expect(site.fetched('/private/secret')).toBe(false); // robots.txt
    expect(site.requests.filter((r) => r.host.startsWith('localhost'))).toEqual([]); // other host, also via redirect
    expect(site.fetched('/logo.png')).toBe(false);
    const changingBefore = docs.find((d) => d.page_id === '/changing');

    // The site changes: one page edited, one gone, one new; the rest unchanged.
    site.html('/changing', '<head><title>Changing</title></head><body><p>Version two, rewritten.</p></body>');
    site.pages.delete('/gone');
    site.html(
      '/',
      `<head><title>Home</title></head><body><nav><a href="/about">About</a> <a href="/changing">Changing</a></nav>
       <main><h1>Welcome</h1><p>Our help center.</p><a href="/gone">Old page</a> <a href="/new">New</a></main></body>`,
    );
    site.html('/new', '<head><title>New page</title></head><body><p>Fresh content.</p></body>');
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();

    docs = await documentsOf(source.id);
    expect(docs.map((d) => d.page_id)).toEqual(['/', '/about', '/changing', '/new']);
    const changing = docs.find((d) => d.page_id === '/changing');
    expect(changing?.id).toBe(changingBefore?.id);
    expect(changing?.content).toBe('Version two, rewritten.');
    expect((changing?.updated_at as string) > (changingBefore?.updated_at as string)).toBe(true);
    expect(docs.find((d) => d.page_id === '/about')?.updated_at).toBe(about?.updated_at);
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'synced', document_count: 4 });
    // The crawl is searchable.
    const found = await t.call({ url: '/api/v1/documents?q=rewritten', key });
    expect(found.body.data.map((d: { id: string }) => d.id)).toEqual([changing?.id]);
  });

  it('uses the sitemap when there is one (robots.txt Sitemap line, sitemap index), same host only', async () => {
    const site = await newSite();
    site.pages.set('/robots.txt', {
      type: 'text/plain',
      body: `User-agent: *\nDisallow: /b-hidden\nSitemap: ${site.origin}/sitemap-index.xml\n`,
    });
    site.pages.set('/sitemap-index.xml', {
      type: 'application/xml',
      body: `<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <sitemap><loc>${site.origin}/sitemap-pages.xml</loc></sitemap>
        <sitemap><loc>http://localhost:${site.port}/foreign.xml</loc></sitemap></sitemapindex>`,
    });
    site.pages.set('/sitemap-pages.xml', {
      type: 'application/xml',
      body: `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <url><loc>${site.origin}/a</loc></url><url><loc>${site.origin}/b-hidden</loc></url>
        <url><loc>${site.origin}/c?lang=en</loc></url><url><loc>http://localhost:${site.port}/d</loc></url></urlset>`,
    });
    site.html('/', '<body><p>Home, linking to <a href="/unlisted">a page not in the sitemap</a>.</p></body>');
    site.html('/a', '<head><title>A</title></head><body><p>Alpha.</p></body>');
    site.html('/b-hidden', '<body><p>Hidden.</p></body>');
    site.pages.set('/c?lang=en', { body: '<html><head><title>C</title></head><body><p>Gamma.</p></body></html>' });
    site.html('/unlisted', '<body><p>Unlisted.</p></body>');
    const source = await createSource({ name: 'Mapped', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    expect((await documentsOf(source.id)).map((d) => d.page_id)).toEqual(['/a', '/c?lang=en']);
    expect(site.fetched('/unlisted')).toBe(false);
    expect(site.fetched('/b-hidden')).toBe(false);
    expect(site.requests.filter((r) => r.host.startsWith('localhost'))).toEqual([]);
  });

  it('reports syncing while the crawl runs; a sync request then joins it', async () => {
    const { site, release } = await slowSite();
    const source = await createSource({ name: 'Slow', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    const running = t.jobs.runUntilIdle();
    const deadline = Date.now() + 10_000;
    while ((await getSource(source.id)).sync_status !== 'syncing' || !site.fetched('/slow')) {
      if (Date.now() > deadline) throw new Error('never syncing');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const joined = await post(`/api/v1/sources/${source.id}/sync`);
    expect(joined.body).toEqual({ object: 'sync', status: 'syncing', source_id: source.id });
    expect((await syncJobs(source.id)).map((j) => j.status)).toEqual(['running']);
    release();
    await running;
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'synced', document_count: 2 });
    expect((await syncJobs(source.id)).map((j) => j.status)).toEqual(['succeeded']);
  });

  it('a sync requested after the domain changed crawls the new domain, after the old crawl and never alongside it', async () => {
    // The server's workers (two at once), so a second sync of the source would run alongside.
    const app = await startTestApp({ ALLOW_PRIVATE_TARGETS: 'true', JOB_POLL_MS: '20' }, { startJobs: true });
    try {
      const { key: k } = await app.tenant();
      const call = (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) =>
        app.call({ method, url, key: k, body });
      const { site: old, release } = await slowSite();
      const fresh = await newSite();
      fresh.html('/', '<body><a href="/new-page">new</a><p>The new site.</p></body>');
      fresh.html('/new-page', '<body><p>A page of the new site.</p></body>');
      const created = await call('POST', '/api/v1/sources', {
        name: 'Moving',
        source_type: 'website',
        domain: old.origin,
      });
      const id = created.body.id as string;
      const read = async () => (await call('GET', `/api/v1/sources/${id}`)).body;
      await call('POST', `/api/v1/sources/${id}/sync`);
      const deadline = Date.now() + 10_000;
      while ((await read()).sync_status !== 'syncing' || !old.fetched('/slow')) {
        if (Date.now() > deadline) throw new Error('never syncing');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await call('PUT', `/api/v1/sources/${id}`, { domain: fresh.origin })).body.domain).toBe(fresh.origin);
      const requested = await call('POST', `/api/v1/sources/${id}/sync`);
      expect(requested.status).toBe(202);
      expect(requested.body).toEqual({ object: 'sync', status: 'syncing', source_id: id });
      const jobs = app.database.db.selectFrom('jobs').select('status').where('dedupe_key', '=', `source-sync:${id}`);
      // While the old crawl waits on its slow page, nothing reads the new site.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(fresh.requests).toEqual([]);
      expect((await jobs.execute()).map((j) => j.status)).toEqual(['running']);
      release();
      while (!['synced', 'failed'].includes((await read()).sync_status)) {
        if (Date.now() > deadline) throw new Error('never synced');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const synced = await read();
      expect(synced).toMatchObject({
        sync_status: 'synced',
        sync_error: null,
        domain: fresh.origin,
        document_count: 2,
      });
      expect(synced.last_synced_at).not.toBeNull();
      const documents = (await call('GET', `/api/v1/documents?source_id=${id}&limit=100`)).body.data as {
        page_id: string;
        url: string;
      }[];
      expect(documents.map((d) => d.page_id).sort()).toEqual(['/', '/new-page']);
      for (const document of documents) expect(document.url.startsWith(fresh.origin)).toBe(true);
      expect(fresh.fetched('/new-page')).toBe(true);
      // One job crawled both sites, one after the other.
      expect((await jobs.execute()).map((j) => j.status)).toEqual(['succeeded']);
    } finally {
      await app.close();
    }
  });

  it('a domain changed during a crawl is crawled in turn, by a follow-up queued behind the jobs due: the old site’s result is not recorded as the new one’s', async () => {
    const { site: old, release } = await slowSite();
    const fresh = await newSite();
    fresh.html('/', '<body><p>Only the new site.</p></body>');
    const source = await createSource({ name: 'Moved while crawling', source_type: 'website', domain: old.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    const claimed = await t.jobs.claim();
    if (!claimed) throw new Error('nothing claimed');
    const running = t.jobs.run(claimed);
    const deadline = Date.now() + 10_000;
    while (!old.fetched('/slow')) {
      if (Date.now() > deadline) throw new Error('never crawling');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await t.call({ method: 'PUT', url: `/api/v1/sources/${source.id}`, key, body: { domain: fresh.origin } });
    release();
    await running;
    // The run ended without crawling the new site: it went back to the queue, so the worker was free.
    expect(fresh.requests).toEqual([]);
    expect((await syncJobs(source.id)).map((j) => j.status)).toEqual(['queued']);
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'pending', domain: fresh.origin });
    await t.jobs.runUntilIdle();
    expect(await getSource(source.id)).toMatchObject({
      sync_status: 'synced',
      domain: fresh.origin,
      document_count: 1,
    });
    expect((await documentsOf(source.id)).map((d) => d.url)).toEqual([`${fresh.origin}/`]);
  });

  it('a sync requested when the running one has written its result runs once more after it', async () => {
    const { site, source } = await syncedSite('Finishing');
    await post(`/api/v1/sources/${source.id}/sync`);
    const claimed = await t.jobs.claim(); // running, its handler not started yet
    if (!claimed) throw new Error('nothing claimed');
    // As the job stands between writing its result and being marked done.
    await t.database.db.updateTable('sources').set({ sync_status: 'synced' }).where('id', '=', source.id).execute();
    const requested = await post(`/api/v1/sources/${source.id}/sync`);
    expect(requested.body).toEqual({ object: 'sync', status: 'pending', source_id: source.id });
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'pending' });
    const before = site.requests.filter((r) => r.path === '/').length;
    await t.jobs.run(claimed);
    expect((await syncJobs(source.id)).filter((j) => j.status !== 'succeeded').map((j) => j.status)).toEqual([
      'queued',
    ]);
    await t.jobs.runUntilIdle();
    expect(site.requests.filter((r) => r.path === '/').length).toBe(before + 2);
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'synced' });
    expect((await syncJobs(source.id)).every((j) => j.status === 'succeeded')).toBe(true);
  });

  it('a sync stopped by a shutdown is not a failed sync: the queue runs it again and it completes', async () => {
    const stopping = await startTestApp({ ALLOW_PRIVATE_TARGETS: 'true', JOB_STOP_GRACE_MS: '50' });
    try {
      const { key: k } = await stopping.tenant();
      const { site, release } = await slowSite();
      const created = await stopping.call({
        method: 'POST',
        url: '/api/v1/sources',
        key: k,
        body: { name: 'Stopped', source_type: 'website', domain: site.origin },
      });
      const id = created.body.id as string;
      const read = async () => (await stopping.call({ url: `/api/v1/sources/${id}`, key: k })).body;
      await stopping.call({ method: 'POST', url: `/api/v1/sources/${id}/sync`, key: k });
      stopping.jobs.start(); // the workers of a running server
      const deadline = Date.now() + 10_000;
      while ((await read()).sync_status !== 'syncing' || !site.fetched('/slow')) {
        if (Date.now() > deadline) throw new Error('never syncing');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await stopping.jobs.stop(); // the grace period passes: the crawl is aborted
      expect(await read()).toMatchObject({ sync_status: 'syncing', sync_error: null });
      const job = stopping.database.db.selectFrom('jobs').where('dedupe_key', '=', `source-sync:${id}`);
      expect((await job.select('status').executeTakeFirstOrThrow()).status).toBe('queued');

      release();
      await stopping.database.db
        .updateTable('jobs')
        .set({ run_at: new Date() })
        .where('dedupe_key', '=', `source-sync:${id}`)
        .execute();
      await stopping.jobs.runUntilIdle();
      expect(await read()).toMatchObject({ sync_status: 'synced', sync_error: null, document_count: 2 });
    } finally {
      await stopping.close();
    }
  });

  it('a site whose start page redirects to another origin fails the sync saying where, and keeps the documents', async () => {
    const { site, source } = await syncedSite('Moved');

    // The site moves (as to https://): every page now redirects to another origin.
    const moved = `http://localhost:${site.port}`;
    for (const path of ['/', '/about', '/changing', '/gone']) {
      site.pages.set(path, { status: 301, body: '', headers: { location: `${moved}${path}` } });
    }
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    const failed = await getSource(source.id);
    expect(failed).toMatchObject({ sync_status: 'failed', document_count: 4 });
    expect(failed.sync_error).toContain(`redirects to ${moved}/`);
  });

  it('a start page that answers 403 or 404, or is not HTML, fails the sync saying so, and keeps every document', async () => {
    const { site, source } = await syncedSite('Walled');
    const answers = [
      // A firewall refuses the start page, or a maintenance notice stands in for it; the other pages still answer.
      [{ status: 403, body: 'refused' }, 'answered 403'],
      [{ status: 404, body: 'refused' }, 'answered 404'],
      [{ type: 'text/plain; charset=utf-8', body: 'Down for maintenance' }, 'answered text/plain, not HTML'],
    ] as const;
    for (const [page, reason] of answers) {
      site.pages.set('/', page);
      await post(`/api/v1/sources/${source.id}/sync`);
      await t.jobs.runUntilIdle();
      const failed = await getSource(source.id);
      expect(failed).toMatchObject({ sync_status: 'failed', document_count: 4 });
      expect(failed.sync_error).toContain(`${site.origin}/ ${reason}`);
    }
  });

  it('a page whose path is too long to store is left out; the rest of the site syncs', async () => {
    const site = await newSite();
    const long = `/p?${'q'.repeat(2100)}`;
    site.html('/', `<body><p>Index.</p><a href="/a">A</a><a href="${long}">Long</a></body>`);
    site.html('/a', '<body><p>Page A.</p></body>');
    site.html(long, '<body><p>Page with a long address.</p></body>');
    const source = await createSource({ name: 'Long paths', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'synced', sync_error: null, document_count: 2 });
    expect(site.fetched(long)).toBe(false);
  });

  it('a crawl stopped by the page cap (200) removes no page it did not reach', async () => {
    const site = await newSite();
    const paths = Array.from({ length: 250 }, (_, i) => `/p${i}`);
    const linking = (order: string[]) =>
      site.html('/', `<body><p>Index.</p>${order.map((p) => `<a href="${p}">${p}</a>`).join('')}</body>`);
    for (const path of paths) site.html(path, `<body><p>Page ${path}.</p></body>`);
    linking(paths);
    const source = await createSource({ name: 'Big', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    expect((await getSource(source.id)).document_count).toBe(200);
    // Linked the other way round, the next crawl reaches other pages first; /p5 is still there.
    linking([...paths].reverse());
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    const after = await getSource(source.id);
    expect(after.sync_status).toBe('synced');
    // The start page and every page of either crawl: /p0 to /p249.
    expect(after.document_count).toBe(251);
  });

  it('a site that cannot be read fails the sync with a readable sync_error and keeps the documents', async () => {
    const { site, source, synced: before } = await syncedSite('Flaky');

    for (const path of ['/', '/about', '/changing', '/gone']) site.pages.set(path, { status: 503, body: 'down' });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    const failed = await getSource(source.id);
    expect(failed.sync_status).toBe('failed');
    expect(failed.sync_error).toMatch(/could be read.*503/);
    expect(failed.last_synced_at).toBe(before.last_synced_at);
    expect(failed.document_count).toBe(4);

    const closed = await newSite();
    const port = closed.port;
    await closed.close();
    const unreachable = await createSource({
      name: 'Down',
      source_type: 'website',
      domain: `http://127.0.0.1:${port}`,
    });
    await post(`/api/v1/sources/${unreachable.id}/sync`);
    await t.jobs.runUntilIdle();
    const down = await getSource(unreachable.id);
    expect(down).toMatchObject({ sync_status: 'failed', last_synced_at: null });
    expect(down.sync_error).toMatch(/ECONNREFUSED/);
    // A new request clears the error and queues again.
    expect((await post(`/api/v1/sources/${unreachable.id}/sync`)).body.status).toBe('pending');
    expect(await getSource(unreachable.id)).toMatchObject({ sync_status: 'pending', sync_error: null });
    await t.jobs.runUntilIdle();
  });

  it('a connection error names the host that was sent, never the address it resolved to', async () => {
    const closed = await newSite();
    const port = closed.port;
    await closed.close();
    const source = await createSource({ name: 'Named', source_type: 'website', domain: `http://localhost:${port}` });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    const failed = await getSource(source.id);
    expect(failed.sync_status).toBe('failed');
    expect(failed.sync_error).toContain(`ECONNREFUSED localhost:${port}`);
    expect(failed.sync_error).not.toMatch(/127\.0\.0\.1|::1/);
  });

  it('a page that fails with a server error keeps its document; a 404 removes it', async () => {
    const site = await linkedSite();
    const source = await createSource({ name: 'Partial', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    site.pages.set('/changing', { status: 500, body: 'oops' });
    site.pages.delete('/gone');
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.jobs.runUntilIdle();
    expect((await documentsOf(source.id)).map((d) => d.page_id)).toEqual(['/', '/about', '/changing']);
    expect((await getSource(source.id)).sync_status).toBe('synced');
  });

  it('a sync whose worker died on every attempt ends failed on the source, not stuck', async () => {
    const site = await linkedSite();
    const source = await createSource({ name: 'Orphan', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    // A worker claims the job and dies; as if every attempt had ended that way, its lease is past.
    const claimed = await t.jobs.claim();
    expect(claimed?.job.payload).toEqual({ source_id: source.id });
    await t.database.db
      .updateTable('jobs')
      .set((eb) => ({ attempts: eb.ref('max_attempts'), locked_until: new Date(Date.now() - 1000) }))
      .where('dedupe_key', '=', `source-sync:${source.id}`)
      .execute();
    await t.jobs.runUntilIdle();
    const failed = await getSource(source.id);
    expect(failed.sync_status).toBe('failed');
    expect(failed.sync_error).toMatch(/interrupted/);
    expect((await syncJobs(source.id)).map((j) => j.status)).toEqual(['failed']);
    // A new request starts a fresh sync.
    expect((await post(`/api/v1/sources/${source.id}/sync`)).body.status).toBe('pending');
    await t.jobs.runUntilIdle();
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'synced', document_count: 4 });
  });

  it('a sync queued for a source deleted since does nothing', async () => {
    const site = await linkedSite();
    const source = await createSource({ name: 'Doomed', source_type: 'website', domain: site.origin });
    await post(`/api/v1/sources/${source.id}/sync`);
    await t.call({ method: 'DELETE', url: `/api/v1/sources/${source.id}`, key });
    await t.jobs.runUntilIdle();
    expect(site.requests).toEqual([]);
    expect((await syncJobs(source.id)).map((j) => j.status)).toEqual(['succeeded']);
  });

  it('caps pages per crawl and bytes per page', async () => {
    const site = await linkedSite();
    site.html('/about', `<body><p>${'x'.repeat(5000)}</p></body>`);
    const capped = await crawlWebsite(site.origin, { allowPrivate: true, maxPages: 2, concurrency: 1 });
    expect(capped.truncated).toBe(true);
    expect(capped.pages).toHaveLength(2);
    const small = await crawlWebsite(site.origin, { allowPrivate: true, maxPageBytes: 2000 });
    expect(small.pages.map((p) => p.page_id).sort()).toEqual(['/', '/changing', '/gone']);
    expect(small.unreadable).toEqual(['/about']);
  });

  it('extracts title, language and block text with a parser, skipping noindex pages', async () => {
    const page = await extractPage(
      `<html lang="de"><head><title> Hilfe &amp; Support </title><meta name="robots" content="noindex"></head>
       <body><div>Eins</div><div>Zwei<br>Drei</div><ul><li>Vier</li><li>Fünf</li></ul></body></html>`,
      new URL('http://x.test/hilfe'),
    );
    expect(page).toMatchObject({
      title: 'Hilfe & Support',
      language: 'de',
      noindex: true,
      content: 'Eins\nZwei\nDrei\nVier\nFünf',
    });
  });

  it('reads a page in the encoding it declares (Content-Type, <meta>, byte order mark), else UTF-8', async () => {
    const site = await newSite();
    const latin1 = (text: string) => Buffer.from(text, 'latin1');
    site.html(
      '/',
      '<body><a href="/header">h</a><a href="/meta">m</a><a href="/bom">b</a><a href="/utf16">u</a><p>Index.</p></body>',
    );
    // A <meta> cannot declare UTF-16: the page is read as UTF-8, as browsers read it.
    site.pages.set('/utf16', {
      type: 'text/html',
      body: Buffer.from(
        '<html><head><meta charset="utf-16"><title>Straße</title></head><body><p>Grüße.</p></body></html>',
      ),
    });
    site.pages.set('/header', {
      type: 'text/html; charset=ISO-8859-1',
      body: latin1(
        '<html><head><title>Café</title></head><body><p>Réponse: le café ouvre à huit heures.</p></body></html>',
      ),
    });
    site.pages.set('/meta', {
      type: 'text/html',
      body: latin1(
        '<html><head><meta charset="windows-1252"><title>Crème brûlée</title></head><body><p>Déjà vu.</p></body></html>',
      ),
    });
    site.pages.set('/bom', {
      type: 'text/html',
      body: Buffer.concat([
        Buffer.from([0xff, 0xfe]),
        Buffer.from('<html><head><title>Ünïcode</title></head><body><p>Grüße.</p></body></html>', 'utf16le'),
      ]),
    });
    const crawl = await crawlWebsite(site.origin, { allowPrivate: true });
    const byId = new Map(crawl.pages.map((p) => [p.page_id, p]));
    expect(byId.get('/header')).toMatchObject({ title: 'Café', content: 'Réponse: le café ouvre à huit heures.' });
    expect(byId.get('/meta')).toMatchObject({ title: 'Crème brûlée', content: 'Déjà vu.' });
    expect(byId.get('/bom')).toMatchObject({ title: 'Ünïcode', content: 'Grüße.' });
    expect(byId.get('/utf16')).toMatchObject({ title: 'Straße', content: 'Grüße.' });
    expect(byId.get('/')?.content).toContain('Index.');
  });

  it('titles a page without <title> or <h1> by its path, decoded where it decodes (/%ff does not)', async () => {
    const body = '<html><body><p>Text.</p></body></html>';
    expect((await extractPage(body, new URL('http://x.test/caf%C3%A9'))).title).toBe('/café');
    expect((await extractPage(body, new URL('http://x.test/%ff'))).title).toBe('/%ff');
  });
});

describe('manual sync and auto-sync', () => {
  it('a manual source sync re-indexes its documents and marks it synced', async () => {
    const source = await createSource({ name: 'FAQ', source_type: 'manual' });
    const doc = await post('/api/v1/documents', {
      title: 'Warranty',
      content: 'Two years.',
      source_id: source.id,
      language: 'nl',
    });
    const ack = await post(`/api/v1/sources/${source.id}/sync`);
    expect(ack.body).toEqual({ object: 'sync', status: 'pending', source_id: source.id });
    await t.jobs.runUntilIdle();
    expect(await getSource(source.id)).toMatchObject({ sync_status: 'synced', sync_error: null, document_count: 1 });
    expect((await t.call({ url: `/api/v1/documents/${doc.body.id}`, key })).body.content).toBe('Two years.');
    expect((await t.call({ url: '/api/v1/documents?q=warranty', key })).body.data).toHaveLength(1);
  });

  it('the scheduler queues syncs of auto-sync sources that are due, and only those', async () => {
    const { key: own } = await t.tenant();
    const site = await linkedSite();
    const auto = await createSource(
      { name: 'Auto', source_type: 'website', domain: site.origin, auto_sync_enabled: true },
      own,
    );
    const manualOnly = await createSource({ name: 'Off', source_type: 'website', domain: site.origin }, own);
    await t.services.sources.enqueueDueAutoSyncs();
    expect((await getSource(auto.id, own)).sync_status).toBe('pending');
    expect((await getSource(manualOnly.id, own)).sync_status).toBe('never_synced');
    await t.jobs.runUntilIdle();
    expect(await getSource(auto.id, own)).toMatchObject({ sync_status: 'synced', document_count: 4 });
    // Synced within the interval: not due again.
    await t.services.sources.enqueueDueAutoSyncs();
    expect((await getSource(auto.id, own)).sync_status).toBe('synced');
    expect(await syncJobs(auto.id)).toHaveLength(1);
    // Once the interval has passed, it is due again.
    await t.database.db
      .updateTable('sources')
      .set({ last_synced_at: new Date(Date.now() - (t.config.autoSyncIntervalMinutes + 1) * 60_000) })
      .where('id', '=', auto.id)
      .execute();
    await t.services.sources.enqueueDueAutoSyncs();
    expect((await getSource(auto.id, own)).sync_status).toBe('pending');
    await t.jobs.runUntilIdle();
    expect(await syncJobs(auto.id)).toHaveLength(2);
  });
});

describe('access', () => {
  it("another tenant's key gets 404 on every source id", async () => {
    const source = await createSource({ name: 'Mine', source_type: 'manual' });
    const stranger = await t.tenant();
    const k = stranger.key;
    expectError(await t.call({ url: `/api/v1/sources/${source.id}`, key: k }), 404, 'not_found');
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/sources/${source.id}`, key: k, body: { name: 'x' } }),
      404,
      'not_found',
    );
    expectError(await post(`/api/v1/sources/${source.id}/sync`, undefined, k), 404, 'not_found');
    expectError(await t.call({ method: 'DELETE', url: `/api/v1/sources/${source.id}`, key: k }), 404, 'not_found');
    expect((await t.call({ url: '/api/v1/sources', key: k })).body.data).toEqual([]);
    expect(await getSource(source.id)).toMatchObject({ name: 'Mine', sync_status: 'never_synced' });
    expect(await syncJobs(source.id)).toEqual([]);
  });

  it('needs knowledge:write to create, change or sync', async () => {
    const { tenantId, key: writer } = await t.tenant(['knowledge:write']);
    const source = await createSource({ name: 'S', source_type: 'manual' }, writer);
    const reader = await t.key(tenantId, ['knowledge:read']);
    expect((await t.call({ url: `/api/v1/sources/${source.id}`, key: reader })).status).toBe(200);
    expectError(await post(`/api/v1/sources/${source.id}/sync`, undefined, reader), 403, 'insufficient_scope');
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/sources/${source.id}`, key: reader, body: {} }),
      403,
      'insufficient_scope',
    );
    expectError(await post('/api/v1/sources', { name: 'x', source_type: 'manual' }, reader), 403, 'insufficient_scope');
  });
});

describe('SSRF guard', () => {
  it('tells public addresses from private, loopback, link-local, unique-local and mapped ones', () => {
    for (const address of [
      '8.8.8.8',
      '1.1.1.1',
      '2606:4700:4700::1111',
      '::ffff:8.8.8.8',
      '::ffff:0:8.8.8.8',
      '2002:0808:0808::1',
    ]) {
      expect(isPublicAddress(address), address).toBe(true);
    }
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:169.254.169.254',
      '::ffff:0:7f00:1',
      '::ffff:0:10.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '2002:7f00:0001::1',
      'ff02::1',
      'not-an-ip',
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
  });

  it('refuses a private target without ALLOW_PRIVATE_TARGETS: the sync fails and nothing is fetched', async () => {
    const site = await linkedSite();
    const strict = await startTestApp();
    try {
      const { key: k } = await strict.tenant();
      const created = await strict.call({
        method: 'POST',
        url: '/api/v1/sources',
        key: k,
        body: { name: 'Inside', source_type: 'website', domain: site.origin },
      });
      expect(created.status).toBe(201);
      await strict.call({ method: 'POST', url: `/api/v1/sources/${created.body.id}/sync`, key: k });
      await strict.jobs.runUntilIdle();
      const source = (await strict.call({ url: `/api/v1/sources/${created.body.id}`, key: k })).body;
      expect(source.sync_status).toBe('failed');
      expect(source.sync_error).toMatch(/127\.0\.0\.1 is not a public address/);
      expect(site.requests).toEqual([]);
      await expect(safeRequest(`http://localhost:${site.port}/`, { allowPrivate: false })).rejects.toThrow(
        /^localhost resolves to an address that is not public; it is not fetched\.$/,
      );
      expect(site.requests).toEqual([]);
    } finally {
      await strict.close();
    }
  });
});
