// The API reference (/docs), the OpenAPI document (/api/v1/openapi.json) and the error catalogue
// (/docs/errors), read over HTTP from the app listening on 127.0.0.1: their answers are compressed
// for a client that accepts it, the API's are not; the catalogue says how to fix each code; and in
// a real Chromium (playwright-core, Debian's /usr/bin/chromium) "Try it out" reaches the server
// showing the page.

import { existsSync } from 'node:fs';
import http from 'node:http';
import zlib from 'node:zlib';
import * as cheerio from 'cheerio';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/operations/errors.js';
import { startTestApp, type TestApp } from '../helpers.js';

/** Debian's Chromium. Without it the browser test is skipped, with one line saying so, except in CI (CI=true), which installs it. */
const CHROMIUM = '/usr/bin/chromium';
const browserMissing = !existsSync(CHROMIUM) && !process.env.CI;
if (browserMissing) {
  console.warn(
    `The reference page's browser test is skipped: ${CHROMIUM} is missing (apt-get install chromium runs it).`,
  );
}

let t: TestApp;
let base = '';
let browser: Browser | undefined;

beforeAll(async () => {
  t = await startTestApp();
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await browser?.close();
  await t.close();
});

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The bytes as sent, before any decoding. */
  bytes: Buffer;
}

/** A request over HTTP whose answer is read as sent (not decompressed). */
function raw(path: string, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${base}${path}`, { method, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, bytes: Buffer.concat(chunks) }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

const decode = (answer: RawAnswer) => {
  const encoding = answer.headers['content-encoding'];
  if (encoding === 'br') return zlib.brotliDecompressSync(answer.bytes);
  if (encoding === 'gzip') return zlib.gunzipSync(answer.bytes);
  return answer.bytes;
};

describe('compression', () => {
  const pages = [
    '/api/v1/openapi.json',
    '/docs/json',
    '/docs/static/swagger-ui-bundle.js',
    '/docs/static/swagger-ui-standalone-preset.js',
    '/docs/static/swagger-ui.css',
    '/docs/errors',
  ];

  for (const path of pages) {
    it(`${path} is sent compressed to a client that accepts it (brotli first, else gzip), the same bytes once decoded`, async () => {
      const plain = await raw(path);
      expect(plain.status).toBe(200);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.bytes.length).toBeGreaterThan(1024);
      const brotli = await raw(path, { 'accept-encoding': 'gzip, deflate, br' });
      expect(brotli.headers['content-encoding']).toBe('br');
      expect(brotli.headers.vary).toContain('accept-encoding');
      expect(brotli.bytes.length).toBeLessThan(plain.bytes.length / 2);
      expect(decode(brotli).equals(plain.bytes)).toBe(true);
      const gzip = await raw(path, { 'accept-encoding': 'gzip' });
      expect(gzip.headers['content-encoding']).toBe('gzip');
      expect(decode(gzip).equals(plain.bytes)).toBe(true);
    });
  }

  it('the API answers JSON uncompressed, over 1 KB too', async () => {
    const { key } = await t.tenant();
    for (let i = 0; i < 8; i++) {
      const created = await t.call({
        method: 'POST',
        url: '/api/v1/tasks',
        key,
        body: { title: `Follow up with the customer about refund number ${i}` },
      });
      expect(created.status).toBe(201);
    }
    const answer = await raw('/api/v1/tasks?limit=8', { 'x-api-key': key, 'accept-encoding': 'gzip, br' });
    expect(answer.status).toBe(200);
    expect(answer.bytes.length).toBeGreaterThan(1024);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(answer.bytes.toString()).data).toHaveLength(8);
  });

  it('a Server-Sent Events stream is never compressed', async () => {
    const { key } = await t.tenant();
    const answer = await raw(
      '/api/v1/messages',
      {
        'x-api-key': key,
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'accept-encoding': 'gzip, br',
      },
      'POST',
      JSON.stringify({ content: 'hello' }),
    );
    expect(answer.status).toBe(200);
    expect(String(answer.headers['content-type'])).toMatch(/^text\/event-stream/);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(answer.bytes.toString()).toContain('event: done');
  });
});

describe('the error catalogue', () => {
  it('lists every code with when it is answered and how to fix it, its code spans as <code>, no backtick left', async () => {
    const answer = await raw('/docs/errors');
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
    const $ = cheerio.load(answer.bytes.toString());
    expect(
      $('th')
        .toArray()
        .map((th) => $(th).text()),
    ).toEqual(['code', 'status', 'type', 'when', 'how to fix it']);
    for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
      const cells = $(`tr#${code} td`);
      expect(cells.length, code).toBe(5);
      expect(cells.eq(1).text()).toBe(String(entry.status));
      expect(cells.eq(4).text().trim().length, `${code}: how to fix it`).toBeGreaterThan(10);
    }
    expect($('body').text()).not.toContain('`');
    // The catalogue's own texts name fields as code: `param`, `Retry-After`.
    expect($('tr#validation_error td').eq(3).find('code').text()).toBe('param');
    expect($('tr#rate_limit_exceeded td').eq(3).find('code').text()).toBe('Retry-After');
    expect($('a[href="/docs"]').length).toBe(1);
  });

  it('escapes what it shows: markup in a text is text', async () => {
    const { inlineHtml } = await import('../../src/http/error-page.js');
    expect(inlineHtml('send `Authorization: Bearer <token>` & <b>wait</b>')).toBe(
      'send <code>Authorization: Bearer &lt;token&gt;</code> &amp; &lt;b&gt;wait&lt;/b&gt;',
    );
  });
});

describe.skipIf(browserMissing)('the reference in a browser', () => {
  it('"Try it out" sends the request to the server showing the page, and the description links the error catalogue', async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    // The page makes no request elsewhere (no CDN, no validator): the reference works offline.
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(base) && !request.url().startsWith('data:')) elsewhere.push(request.url());
    });
    const tasks: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/api/v1/tasks')) tasks.push(request.url());
    });

    await page.goto(`${base}/docs/#/Tasks/listTasks`);
    const servers = page.locator('.servers select');
    await servers.waitFor({ timeout: 120_000 });
    expect(await servers.inputValue()).toBe('/');
    const link = page.locator('.info .description a[href="/docs/errors"]');
    expect(await link.count()).toBe(1);

    const operation = page.locator('#operations-Tasks-listTasks');
    await operation.locator('.try-out__btn').click({ timeout: 120_000 });
    await operation.locator('button.execute').click();
    const status = operation.locator('.live-responses-table .response .response-col_status');
    await status.waitFor({ timeout: 60_000 });
    // No key was given: this server's 401, not a request that never left the browser.
    expect((await status.textContent())?.trim()).toBe('401');
    expect(tasks).toHaveLength(1);
    expect(new URL(tasks[0] as string).origin).toBe(base);
    expect(elsewhere).toEqual([]);
    expect(problems).toEqual([]);
  }, 300_000);
});
