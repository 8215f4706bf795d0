// The owners' settings page (spec: Authentication 5: "Keys and their scopes are managed by the
// workspace owner in the admin settings under integrations, API"). A real Chromium (playwright-core,
// Debian's /usr/bin/chromium) drives the page against the app listening on 127.0.0.1, and checks at
// a phone's and two desktops' widths that the keys fit the screen (full-page screenshots go to
// test-results/settings/); the HTTP-level rules (credentials, CSRF, cookie flags, hashing) are
// checked by requests.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/domain/accounts/owners.js';
import { ALL_SCOPES } from '../../src/domain/accounts/scopes.js';
import { sha256Hex } from '../../src/lib/ids.js';
import { CSRF_COOKIE, LOGIN_ATTEMPTS_PER_MINUTE, SESSION_COOKIE } from '../../src/settings/index.js';
import { ADMIN_TOKEN, expectError, startTestApp, type TestApp } from '../helpers.js';

const SETTINGS = '/admin/settings/integrations/api';
/** Debian's Chromium. Without it the browser test is skipped, with one line saying so, except in CI (CI=true), which installs it. */
const CHROMIUM = '/usr/bin/chromium';
const browserMissing = !existsSync(CHROMIUM) && !process.env.CI;
if (browserMissing) {
  console.warn(
    `The settings page's browser test is skipped: ${CHROMIUM} is missing (apt-get install chromium runs it).`,
  );
}
/** Where the browser test writes its full-page screenshots (git-ignored). */
const SCREENSHOTS = path.resolve('test-results/settings');
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

let t: TestApp;
let base = '';
let browser: Browser | undefined;

beforeAll(async () => {
  // TRUST_PROXY: tests tell https from http (X-Forwarded-Proto) and give each test its own client IP.
  t = await startTestApp({ TRUST_PROXY: 'true' });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await browser?.close();
  await t.close();
});

/** A tenant with an owner whose password the test chose. */
async function tenantWithOwner(password = 'correct horse battery staple') {
  const tenantId = `t-${randomBytes(5).toString('hex')}`;
  const email = `owner@${tenantId}.example.com`;
  const created = await t.call({
    method: 'POST',
    url: '/admin/v1/tenants',
    headers: admin,
    body: { tenant_id: tenantId, name: 'Acme', owner: { email, password } },
  });
  expect(created.status).toBe(201);
  return { tenantId, email, password, owner: created.body.owner };
}

/** A cookie-keeping client over `inject`, from its own client IP. */
function agent(ip = `10.0.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`) {
  const jar = new Map<string, string>();
  const send = async (method: 'GET' | 'POST', url: string, form?: Record<string, string | string[]>, extra = {}) => {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const response = await t.app.inject({
      method,
      url,
      headers: {
        'x-forwarded-for': ip,
        ...(cookie ? { cookie } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...extra,
      },
      ...(form
        ? {
            payload: new URLSearchParams(
              Object.entries(form).flatMap(([k, v]): [string, string][] =>
                Array.isArray(v) ? v.map((x): [string, string] => [k, x]) : [[k, v]],
              ),
            ).toString(),
          }
        : {}),
    });
    for (const c of response.cookies as { name: string; value: string; expires?: Date }[]) {
      if (c.value === '' || (c.expires && c.expires.getTime() < Date.now())) jar.delete(c.name);
      else jar.set(c.name, c.value);
    }
    return response;
  };
  const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
  return {
    jar,
    send,
    csrfOf,
    async signIn(tenantId: string, email: string, password: string, extra = {}) {
      const page = await send('GET', '/admin/login', undefined, extra);
      return send('POST', '/admin/login', { _csrf: csrfOf(page.body), tenant_id: tenantId, email, password }, extra);
    },
    async csrf() {
      return csrfOf((await send('GET', SETTINGS)).body);
    },
  };
}

/** Chromium, launched once for the file's browser tests; the screenshot folder is made and named. */
async function openBrowser(): Promise<Browser> {
  if (browser) return browser;
  mkdirSync(SCREENSHOTS, { recursive: true });
  console.info(`The settings page's screenshots are written to ${SCREENSHOTS}`);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  return browser;
}

/** Signs the owner in through the page's own form. */
async function signInOnPage(page: Page, owner: { tenantId: string; email: string; password: string }) {
  await page.goto(`${base}/admin/login`);
  await page.fill('#tenant_id', owner.tenantId);
  await page.fill('#email', owner.email);
  await page.fill('#password', owner.password);
  await Promise.all([page.waitForURL(`${base}${SETTINGS}`), page.click('button[type=submit].primary')]);
}

interface Fit {
  /** The page's scroll width, the window's width, the keys table's and its card's widths. */
  pageWidth: number;
  window: number;
  table: number;
  card: number;
  /** What does not fit, with its box and the box it should be in (left..right). */
  overflows: string[];
}

/**
 * Run in the page (as text: the project's types know no DOM). Lists everything that does not fit:
 * an element of the keys card outside the card, an element of a key's cell outside that cell.
 * Hidden elements (no box, or not rendered, as the inside of a closed <details>) are left out;
 * half a pixel of rounding is allowed.
 */
const MEASURE_FIT = `(() => {
  const table = document.querySelector('#keys');
  const card = table && table.closest('.card');
  if (!card) throw new Error('no keys card on the page');
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\\s+/).join('.') : '') +
    ' "' + (el.textContent || '').trim().slice(0, 30) + '"';
  const outside = (inner, outer) => inner.left < outer.left - 0.5 || inner.right > outer.right + 0.5 ||
    inner.top < outer.top - 0.5 || inner.bottom > outer.bottom + 0.5;
  const span = (box) => Math.round(box.left) + '..' + Math.round(box.right);
  const cardBox = card.getBoundingClientRect();
  const overflows = [];
  for (const el of card.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || !el.checkVisibility({ visibilityProperty: true })) continue;
    const cell = el.parentElement && el.parentElement.closest('td, th');
    const within = cell && card.contains(cell) ? cell : card;
    const outer = within === card ? cardBox : within.getBoundingClientRect();
    if (outside(box, outer)) {
      overflows.push(name(el) + ' at ' + span(box) + ' outside ' + (within === card ? 'the card' : name(within)) + ' at ' + span(outer));
    }
  }
  return { pageWidth: document.documentElement.scrollWidth, window: window.innerWidth,
    table: table.getBoundingClientRect().width, card: cardBox.width, overflows };
})()`;

const measureFit = (page: Page) => page.evaluate(MEASURE_FIT) as Promise<Fit>;

describe('owner accounts', () => {
  it('a tenant created with an owner but no password gets a generated one, returned once; it signs in', async () => {
    const tenantId = `t-${randomBytes(5).toString('hex')}`;
    const created = await t.call({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: admin,
      body: { tenant_id: tenantId, name: 'Generated', owner: { email: 'Boss@Example.com' } },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: tenantId,
      object: 'tenant',
      owner: { object: 'owner', email: 'Boss@Example.com' },
    });
    expect(created.body.owner_password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const signedIn = await agent().signIn(tenantId, 'boss@example.com', created.body.owner_password);
    expect(signedIn.statusCode).toBe(303);
    expect(signedIn.headers.location).toBe(SETTINGS);
  });

  it('the password is stored as a salted scrypt hash, never as the password', async () => {
    const { tenantId, password } = await tenantWithOwner();
    const { owner: other } = await tenantWithOwner(password);
    const rows = await t.database.db
      .selectFrom('owners')
      .select(['tenant_id', 'password_hash'])
      .where('tenant_id', 'in', [tenantId, other.tenant_id])
      .execute();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.password_hash).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
      expect(row.password_hash).not.toContain(password);
      expect(await verifyPassword(password, row.password_hash)).toBe(true);
      expect(await verifyPassword(`${password}x`, row.password_hash)).toBe(false);
    }
    // A random salt each time: the same password hashes differently.
    expect(rows[0]?.password_hash).not.toBe(rows[1]?.password_hash);
  });

  it('an owner signs in with the e-mail as registered, whatever its capitals (final sigma, dotted I)', async () => {
    const tenantId = `t-${randomBytes(5).toString('hex')}`;
    const password = 'correct horse battery staple';
    const created = await t.call({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: admin,
      body: { tenant_id: tenantId, name: 'Greek', owner: { email: 'ΟΔΥΣ@example.com', password } },
    });
    expect(created.status, created.text).toBe(201);
    const added = await t.call({
      method: 'POST',
      url: `/admin/v1/tenants/${tenantId}/owners`,
      headers: admin,
      body: { email: 'İNFO@example.com', password },
    });
    expect(added.status, added.text).toBe(201);
    for (const email of ['ΟΔΥΣ@example.com', 'İNFO@example.com']) {
      expect((await agent().signIn(tenantId, email, password)).statusCode, email).toBe(303);
    }
  });

  it('owner input is validated: a bad e-mail or a short password answers 422 with its param; a second owner with the same e-mail 409', async () => {
    const tenantId = `t-${randomBytes(5).toString('hex')}`;
    const bad = (owner: unknown) =>
      t.call({
        method: 'POST',
        url: '/admin/v1/tenants',
        headers: admin,
        body: { tenant_id: tenantId, name: 'x', owner },
      });
    expectError(await bad({ email: 'not-an-email' }), 422, 'validation_error', 'owner.email');
    expectError(await bad({ email: 'a@b.co', password: 'short' }), 422, 'validation_error', 'owner.password');
    expect((await t.call({ url: `/admin/v1/tenants/${tenantId}`, headers: admin })).status).toBe(404);

    const { tenantId: existing, email } = await tenantWithOwner();
    const added = await t.call({
      method: 'POST',
      url: `/admin/v1/tenants/${existing}/owners`,
      headers: admin,
      body: { email: 'second@example.com' },
    });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ object: 'owner', tenant_id: existing, email: 'second@example.com' });
    expect(added.body.password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expectError(
      await t.call({
        method: 'POST',
        url: `/admin/v1/tenants/${existing}/owners`,
        headers: admin,
        body: { email: email.toUpperCase() },
      }),
      409,
      'conflict',
      'email',
    );
  });
});

describe.skipIf(browserMissing)('the settings page in a browser', () => {
  it('an owner signs in, creates a key with chosen scopes, sees its secret once, uses it, revokes it, and the API refuses it within a second', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const context = await (await openBrowser()).newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });

    // Not signed in: the settings page sends the owner to the sign-in form.
    await page.goto(`${base}${SETTINGS}`);
    expect(new URL(page.url()).pathname).toBe('/admin/login');
    await page.fill('#tenant_id', tenantId);
    await page.fill('#email', email);
    await page.fill('#password', password);
    await Promise.all([page.waitForURL(`${base}${SETTINGS}`), page.click('button[type=submit].primary')]);
    expect(await page.textContent('h1')).toBe('API keys');
    expect(await page.textContent('header.top .who')).toContain(email);
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === SESSION_COOKIE);
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/admin', secure: false });

    // Create a key: apps write (the page ticks apps read with it) and knowledge read, 30 days.
    await page.fill('#name', 'CI pipeline');
    await page.check('#scope-apps-write');
    expect(await page.isChecked('#scope-apps-read')).toBe(true);
    await page.check('#scope-knowledge-read');
    await page.click('button[data-days="30"]');
    const expiry = await page.inputValue('#expires_on');
    expect(expiry).toBe(new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10));
    await Promise.all([page.waitForSelector('#new-secret'), page.click('#create-key button[type=submit]')]);
    const secret = await page.inputValue('#new-secret');
    expect(secret).toMatch(/^wsk_/);
    // The address bar no longer holds the form post, so a reload cannot create a second key.
    await page.waitForURL(`${base}${SETTINGS}`);
    const row = page.locator('#keys tbody tr', { hasText: 'CI pipeline' });
    expect(await row.locator('.chip').allTextContents()).toEqual(['apps:read', 'apps:write', 'knowledge:read']);
    expect(await row.locator('.badge').textContent()).toBe('active');
    expect(await row.locator('.prefix').textContent()).toBe(`${secret.slice(0, 12)}…`);
    expect(await row.locator('td.expires').textContent()).toBe(`${expiry} 23:59 UTC`);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'settings-page-created.png'), fullPage: true });

    // The key works against the API with exactly its scopes.
    const api = (url: string) => fetch(`${base}${url}`, { headers: { 'x-api-key': secret } });
    expect((await api('/api/v1/apps')).status).toBe(200);
    expect((await api('/api/v1/documents')).status).toBe(200);
    const denied = await api('/api/v1/tasks');
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { error: { code: string } }).error.code).toBe('insufficient_scope');

    // Shown once: a fresh load of the page has the key's prefix, never its secret.
    await page.goto(`${base}${SETTINGS}`);
    expect(await page.locator('#new-secret').count()).toBe(0);
    expect(await page.content()).not.toContain(secret);

    // Revoke it on the page (the confirmation dialog is accepted).
    page.once('dialog', (dialog) => void dialog.accept());
    await Promise.all([
      page.waitForURL(`${base}${SETTINGS}?done=revoke`),
      page.locator('#keys tbody tr', { hasText: 'CI pipeline' }).locator('button[data-action=revoke]').click(),
    ]);
    const revokedAt = Date.now();
    expect(await page.textContent('.notice.ok')).toContain('revoked');
    expect(await page.locator('#keys tbody tr', { hasText: 'CI pipeline' }).locator('.badge').textContent()).toBe(
      'revoked',
    );
    let refused = await api('/api/v1/apps');
    while (refused.status !== 401 && Date.now() - revokedAt < 1000) refused = await api('/api/v1/apps');
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    expect(Date.now() - revokedAt).toBeLessThan(1000);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'settings-page.png'), fullPage: true });

    // Sign out ends the session.
    await Promise.all([page.waitForURL(`${base}/admin/login`), page.click('header.top button')]);
    await page.goto(`${base}${SETTINGS}`);
    expect(new URL(page.url()).pathname).toBe('/admin/login');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('the keys fit the screen at 390, 1280 and 1920 px: no sideways scroll, every cell, badge and button inside the keys card, Revoke in view, a key holding every scope shown as one "all scopes" badge, the keys still read as a table', async () => {
    const owner = await tenantWithOwner();
    const create = async (name: string, scopes: readonly string[], expiresAt: string | null = null) => {
      const created = await t.call({
        method: 'POST',
        url: `/admin/v1/tenants/${owner.tenantId}/api-keys`,
        headers: admin,
        body: { name, scopes, expires_at: expiresAt },
      });
      expect(created.status, created.text).toBe(201);
      return created.body.id as string;
    };
    const change = async (keyId: string, action: 'lock' | 'revoke') =>
      expect(
        (await t.call({ method: 'POST', url: `/admin/v1/api-keys/${keyId}/${action}`, headers: admin })).status,
      ).toBe(200);
    const inAYear = new Date(Date.now() + 365 * 86_400_000).toISOString();
    const everyScope = 'Production deploy';
    const unbroken = `nightly-export-${'0123456789'.repeat(18)}-end`.slice(0, 200);
    const spaced =
      'Support inbox synchronisation for the customer success team in Europe, the Middle East and Africa'.repeat(2);
    await create('CI pipeline', ['apps:read', 'apps:write', 'knowledge:read'], inAYear);
    await create(everyScope, ALL_SCOPES, inAYear);
    await create(unbroken, ALL_SCOPES);
    await create(
      spaced,
      ALL_SCOPES.filter((scope) => scope.endsWith(':read')),
      inAYear,
    );
    await change(
      await create('Analytics export', ['analytics:read', 'conversations:write', 'knowledge:write']),
      'lock',
    );
    await change(await create('Old staging key', ['apps:read']), 'revoke');
    await t.database.db
      .updateTable('api_keys')
      .set({ last_used_at: new Date() })
      .where('tenant_id', '=', owner.tenantId)
      .where('name', '!=', 'CI pipeline')
      .execute();

    const context = await (await openBrowser()).newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    // The sign-in form fits a phone as well.
    await page.setViewportSize({ width: 390, height: 900 });
    await page.goto(`${base}/admin/login`);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'sign-in-390.png'), fullPage: true });
    expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    await signInOnPage(page, owner);
    const row = (name: string) => page.locator('#keys tbody tr', { hasText: name });

    for (const width of [390, 1280, 1920]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${base}${SETTINGS}`);
      expect(await page.locator('#keys tbody tr').count()).toBe(6);
      const shot = path.join(SCREENSHOTS, `keys-${width}.png`);
      await page.screenshot({ path: shot, fullPage: true });
      const fit = await measureFit(page);
      console.info(
        `${width} px: page ${fit.pageWidth} px wide, keys table ${Math.round(fit.table)} px in a card of ${Math.round(fit.card)} px (${shot})`,
      );
      expect(fit.overflows, `${width} px`).toEqual([]);
      expect(fit.pageWidth, `${width} px`).toBeLessThanOrEqual(fit.window);

      // Laid out as a table or as a block per key, the keys keep their table semantics: each row is
      // headed by the key's name, each date names its column, each button names its key.
      expect(await page.getByRole('rowheader').count()).toBe(6);
      expect(await page.getByRole('cell', { name: /^Last used/ }).count()).toBe(width < 960 ? 6 : 0);
      expect(await page.getByRole('columnheader', { name: 'Last used' }).count()).toBe(width < 960 ? 0 : 1);
      expect(await page.getByRole('button', { name: `Revoke ${everyScope}`, exact: true }).isVisible()).toBe(true);
      // Every key that can be revoked shows its Revoke button, whole, inside the window.
      const revokes = page.locator('#keys button[data-action=revoke]');
      expect(await revokes.count()).toBe(5);
      for (const button of await revokes.all()) {
        expect(await button.isVisible()).toBe(true);
        const box = await button.boundingBox();
        expect(box?.x ?? -1, `${width} px`).toBeGreaterThanOrEqual(0);
        expect((box?.x ?? 0) + (box?.width ?? Number.POSITIVE_INFINITY), `${width} px`).toBeLessThanOrEqual(width);
      }

      // A key holding every scope shows one badge; the full list is in its tooltip and opens on demand.
      for (const name of [everyScope, unbroken]) {
        expect(await row(name).locator('.chip:visible').allTextContents()).toEqual(['all scopes']);
        expect(await row(name).locator('summary').getAttribute('title')).toBe(`All scopes: ${ALL_SCOPES.join(', ')}`);
      }
      // Other keys list their scopes one by one.
      expect(await row(spaced).locator('.chip:visible').count()).toBe(ALL_SCOPES.length / 2);
      expect(await row('CI pipeline').locator('.chip:visible').allTextContents()).toEqual([
        'apps:read',
        'apps:write',
        'knowledge:read',
      ]);
    }

    // Opened, the full lists still fit, on a phone too.
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${base}${SETTINGS}`);
      for (const name of [everyScope, unbroken]) await row(name).locator('summary').click();
      expect(await row(everyScope).locator('.chip:visible').allTextContents()).toEqual(['all scopes', ...ALL_SCOPES]);
      await page.screenshot({ path: path.join(SCREENSHOTS, `keys-${width}-scopes-open.png`), fullPage: true });
      const fit = await measureFit(page);
      expect(fit.overflows, `${width} px, scopes open`).toEqual([]);
      expect(fit.pageWidth, `${width} px, scopes open`).toBeLessThanOrEqual(fit.window);
    }
    expect(problems).toEqual([]);
    await context.close();
  });
});

describe('sign-in, sessions and CSRF over HTTP', () => {
  it('wrong credentials answer 401 with one generic message, whatever was wrong, and set no session', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    const attempts = [
      [tenantId, email, 'wrong password 123'],
      [tenantId, 'nobody@example.com', password],
      ['no-such-tenant', email, password],
    ] as const;
    for (const [tenant, mail, pass] of attempts) {
      const response = await client.signIn(tenant, mail, pass);
      expect(response.statusCode).toBe(401);
      expect(response.body).toContain('Wrong workspace, e-mail or password.');
      expect(response.body).not.toContain('Unknown');
      expect(client.jar.has(SESSION_COOKIE)).toBe(false);
    }
    expect((await client.send('GET', SETTINGS)).headers.location).toBe('/admin/login');
  });

  it('the session cookie is HttpOnly, SameSite=Lax, scoped to /admin, expires, is Secure over https, and is stored only as a SHA-256 hash', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const plain = await agent().signIn(tenantId, email, password);
    const cookie = (
      plain.cookies as {
        name: string;
        value: string;
        httpOnly?: boolean;
        sameSite?: string;
        path?: string;
        secure?: boolean;
        expires?: Date;
      }[]
    ).find((c) => c.name === SESSION_COOKIE);
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/admin' });
    expect(cookie?.secure).toBeFalsy();
    const hoursLeft = ((cookie?.expires?.getTime() ?? 0) - Date.now()) / 3_600_000;
    expect(hoursLeft).toBeGreaterThan(11.9);
    expect(hoursLeft).toBeLessThanOrEqual(12);

    const rows = await t.database.db
      .selectFrom('owner_sessions')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]?.token_hash).toBe(sha256Hex(cookie?.value ?? ''));
    expect(JSON.stringify(rows)).not.toContain(cookie?.value);

    const https = { 'x-forwarded-proto': 'https' };
    const secure = await agent().signIn(tenantId, email, password, https);
    const secureCookie = (secure.cookies as { name: string; secure?: boolean }[]).find(
      (c) => c.name === SESSION_COOKIE,
    );
    expect(secureCookie?.secure).toBe(true);
  });

  it('a POST without a CSRF token, or with a wrong one, answers 403 and changes nothing', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    expect((await client.signIn(tenantId, email, password)).statusCode).toBe(303);
    const token = await client.csrf();
    expect(token).not.toBe('');

    const missing = await client.send('POST', `${SETTINGS}/keys`, { name: 'sneaky', scopes: 'apps:read' });
    expect(missing.statusCode).toBe(403);
    expect(missing.headers['content-type']).toContain('text/html');
    const forged = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: `${token.slice(0, -2)}xx`,
      name: 'sneaky',
      scopes: 'apps:read',
    });
    expect(forged.statusCode).toBe(403);
    // A token from another browser (another CSRF secret) is refused too.
    const otherToken = await agent()
      .send('GET', '/admin/login')
      .then((r) => /name="_csrf" value="([^"]+)"/.exec(r.body)?.[1] ?? '');
    const foreign = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: otherToken,
      name: 'sneaky',
      scopes: 'apps:read',
    });
    expect(foreign.statusCode).toBe(403);
    const keys = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(keys.body.data).toEqual([]);

    // The sign-in and sign-out forms are protected as well.
    expect((await agent().send('POST', '/admin/login', { tenant_id: tenantId, email, password })).statusCode).toBe(403);
    expect((await client.send('POST', '/admin/logout', {})).statusCode).toBe(403);
    expect((await client.send('GET', SETTINGS)).statusCode).toBe(200); // still signed in

    // With the page's token, the same form works.
    const created = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: token,
      name: 'legit',
      scopes: ['apps:read', 'tasks:write'],
    });
    expect(created.statusCode).toBe(201);
    const after = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(after.body.data).toMatchObject([{ name: 'legit', scopes: ['apps:read', 'tasks:write'], status: 'active' }]);
  });

  it('the CSRF secret is renewed at sign-in: a token from the sign-in page no longer works afterwards', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    const before = client.csrfOf((await client.send('GET', '/admin/login')).body);
    const secretBefore = client.jar.get(CSRF_COOKIE);
    expect(
      (await client.send('POST', '/admin/login', { _csrf: before, tenant_id: tenantId, email, password })).statusCode,
    ).toBe(303);
    const stale = await client.send('POST', `${SETTINGS}/keys`, { _csrf: before, name: 'stale', scopes: 'apps:read' });
    expect(stale.statusCode).toBe(403);
    await client.csrf();
    expect(client.jar.get(CSRF_COOKIE)).not.toBe(secretBefore);
  });

  it("a CSRF cookie and token from another session are refused (another owner's, the same owner's before sign-out, a signed-out browser's); the session's own pass", async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const other = await tenantWithOwner();
    const expired = 'This form has expired or did not come from this page. Reload the page and try again.';
    const client = agent();

    // The same owner's earlier session: its CSRF cookie and token, kept from before sign-out.
    expect((await client.signIn(tenantId, email, password)).statusCode).toBe(303);
    const earlier = { token: await client.csrf(), secret: client.jar.get(CSRF_COOKIE) ?? '' };
    expect((await client.send('POST', '/admin/logout', { _csrf: earlier.token })).statusCode).toBe(303);
    expect((await client.signIn(tenantId, email, password)).statusCode).toBe(303);
    const own = { token: await client.csrf(), secret: client.jar.get(CSRF_COOKIE) ?? '' };

    // Another owner's session, and a browser that is not signed in, each with its own pair.
    const intruder = agent();
    expect((await intruder.signIn(other.tenantId, other.email, other.password)).statusCode).toBe(303);
    const foreign = { token: await intruder.csrf(), secret: intruder.jar.get(CSRF_COOKIE) ?? '' };
    const stranger = agent();
    const signedOut = {
      token: stranger.csrfOf((await stranger.send('GET', '/admin/login')).body),
      secret: stranger.jar.get(CSRF_COOKIE) ?? '',
    };

    // Planted in the owner's browser (a cookie a sibling subdomain could set), each pair is refused.
    for (const [label, pair] of Object.entries({ earlier, foreign, signedOut })) {
      expect(pair.token, label).not.toBe('');
      client.jar.set(CSRF_COOKIE, pair.secret);
      const planted = await client.send('POST', `${SETTINGS}/keys`, {
        _csrf: pair.token,
        name: 'planted',
        scopes: 'apps:read',
      });
      expect(planted.statusCode, label).toBe(403);
      expect(planted.body, label).toContain(expired);
    }
    const none = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(none.body.data).toEqual([]);

    // The session's own cookie and token pass.
    client.jar.set(CSRF_COOKIE, own.secret);
    const created = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: own.token,
      name: 'own',
      scopes: 'apps:read',
    });
    expect(created.statusCode).toBe(201);
    const keys = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(keys.body.data).toMatchObject([{ name: 'own' }]);
  });

  it('lock and unlock on the page take effect on the API at once; an invalid form answers 422 and creates nothing', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    await client.signIn(tenantId, email, password);
    const token = await client.csrf();
    const created = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: token,
      name: 'svc',
      scopes: 'apps:read',
      expires_on: '2099-12-31',
    });
    expect(created.statusCode).toBe(201);
    const secret = /id="new-secret" type="text" readonly value="([^"]+)"/.exec(created.body)?.[1] ?? '';
    const keyId = /data-key-id="([^"]+)"/.exec(created.body)?.[1] ?? '';
    const record = await t.call({ url: `/admin/v1/api-keys/${keyId}`, headers: admin });
    expect(record.body).toMatchObject({ tenant_id: tenantId, expires_at: '2099-12-31T23:59:59.999Z' });

    const lock = await client.send('POST', `${SETTINGS}/keys/${keyId}/lock`, { _csrf: token });
    expect(lock.statusCode).toBe(303);
    expectError(await t.call({ url: '/api/v1/apps', key: secret }), 401, 'invalid_api_key');
    expect((await client.send('GET', `${SETTINGS}?done=lock`)).body).toContain('data-status="locked"');
    await client.send('POST', `${SETTINGS}/keys/${keyId}/unlock`, { _csrf: token });
    expect((await t.call({ url: '/api/v1/apps', key: secret })).status).toBe(200);

    const noScope = await client.send('POST', `${SETTINGS}/keys`, { _csrf: token, name: 'empty' });
    expect(noScope.statusCode).toBe(422);
    expect(noScope.body).toContain('Choose at least one scope.');
    const past = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: token,
      name: 'old',
      scopes: 'apps:read',
      expires_on: '2001-01-01',
    });
    expect(past.statusCode).toBe(422);
    expect(past.body).toContain('expires_at must be in the future.');
    const unknown = await client.send('POST', `${SETTINGS}/keys`, { _csrf: token, name: 'x', scopes: 'root:write' });
    expect(unknown.statusCode).toBe(422);
    const list = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(list.body.data.map((k: { name: string }) => k.name)).toEqual(['svc']);
  });

  it('a password is taken as typed (spaces and emoji too), and odd input answers 422 or 404, never 500', async () => {
    // Spaces at either end are part of the password; its length counts characters, not UTF-16 units.
    for (const password of ['  spaced password 12  ', '😀'.repeat(150)]) {
      const owner = await tenantWithOwner(password);
      const signedIn = await agent().signIn(owner.tenantId, owner.email, password);
      expect(signedIn.statusCode, password).toBe(303);
    }
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    await client.signIn(tenantId, email, password);
    const token = await client.csrf();
    // A day that does not exist is refused, not moved to March.
    const feb30 = await client.send('POST', `${SETTINGS}/keys`, {
      _csrf: token,
      name: 'svc',
      scopes: 'apps:read',
      expires_on: '2030-02-30',
    });
    expect(feb30.statusCode).toBe(422);
    expect(feb30.body).toContain('The expiry date must be a date');
    // A key id that is not a UUID: no such key.
    const malformed = await client.send('POST', `${SETTINGS}/keys/${'-'.repeat(36)}/revoke`, { _csrf: token });
    expect(malformed.statusCode).toBe(404);
    // A JSON body whose fields are not text reads them as absent.
    const numeric = await t.app.inject({
      method: 'POST',
      url: `${SETTINGS}/keys`,
      headers: {
        'content-type': 'application/json',
        'x-forwarded-for': '10.9.9.9',
        cookie: [...client.jar].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      payload: JSON.stringify({ _csrf: token, name: 123, scopes: ['apps:read'] }),
    });
    expect(numeric.statusCode).toBe(422);
    // A NUL (no text column stores one) reads as not sent: a form refused, a sign-in failed.
    const nul = await client.send('POST', `${SETTINGS}/keys`, { _csrf: token, name: 'a\u0000b', scopes: 'apps:read' });
    expect(nul.statusCode).toBe(422);
    const nulScope = await client.send('POST', `${SETTINGS}/keys`, { _csrf: token, name: 'n', scopes: 'apps:\u0000' });
    expect(nulScope.statusCode).toBe(422);
    for (const [tenant, mail] of [
      [`${tenantId}\u0000`, email],
      [tenantId, `${email}\u0000`],
    ] as const) {
      const refused = await agent().signIn(tenant, mail, password);
      expect(refused.statusCode).toBe(401);
    }
    const list = await t.call({ url: `/admin/v1/tenants/${tenantId}/api-keys`, headers: admin });
    expect(list.body.data).toEqual([]);
  });

  it("an owner cannot touch another tenant's key: 404, and the key stays active", async () => {
    const mine = await tenantWithOwner();
    const theirs = await t.tenant(['apps:read']);
    const theirKeyId = (await t.call({ url: `/admin/v1/tenants/${theirs.tenantId}/api-keys`, headers: admin })).body
      .data[0].id;
    const client = agent();
    await client.signIn(mine.tenantId, mine.email, mine.password);
    const token = await client.csrf();
    const attempt = await client.send('POST', `${SETTINGS}/keys/${theirKeyId}/revoke`, { _csrf: token });
    expect(attempt.statusCode).toBe(404);
    expect((await t.call({ url: '/api/v1/apps', key: theirs.key })).status).toBe(200);
    expect((await client.send('GET', SETTINGS)).body).not.toContain(theirKeyId);
  });

  it('sign-out deletes the session: its cookie no longer opens the page', async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    await client.signIn(tenantId, email, password);
    const cookie = client.jar.get(SESSION_COOKIE);
    const token = await client.csrf();
    const out = await client.send('POST', '/admin/logout', { _csrf: token });
    expect(out.statusCode).toBe(303);
    expect(out.headers.location).toBe('/admin/login');
    const rows = await t.database.db
      .selectFrom('owner_sessions')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(rows).toEqual([]);
    const replay = await t.app.inject({ url: SETTINGS, headers: { cookie: `${SESSION_COOKIE}=${cookie}` } });
    expect(replay.statusCode).toBe(303);
    expect(replay.headers.location).toBe('/admin/login');
  });

  it("a session on another tenant's host name does not open the page", async () => {
    const { tenantId, email, password } = await tenantWithOwner();
    const client = agent();
    await client.signIn(tenantId, email, password);
    expect((await client.send('GET', SETTINGS, undefined, { host: `${tenantId}.localhost` })).statusCode).toBe(200);
    const other = await client.send('GET', SETTINGS, undefined, { host: 'someone-else.localhost' });
    expect(other.statusCode).toBe(303);
    // An empty port names the same host; a malformed Host names none, and no session is good on it.
    expect((await client.send('GET', SETTINGS, undefined, { host: `${tenantId}.localhost:` })).statusCode).toBe(200);
    for (const host of ['someone-else.localhost:', 'someone-else.localhost..', 'someone-else.localhost:x']) {
      expect((await client.send('GET', SETTINGS, undefined, { host })).statusCode, host).toBe(303);
    }
  });

  it('the pages are not in the OpenAPI document and answer with a strict Content-Security-Policy and no-store', async () => {
    const doc = await t.call({ url: '/api/v1/openapi.json' });
    expect(
      Object.keys(doc.body.paths).filter((p) => p.startsWith('/admin/settings') || p.startsWith('/admin/login')),
    ).toEqual([]);
    const login = await agent().send('GET', '/admin/login');
    expect(login.headers['content-security-policy']).toContain("script-src 'self'");
    expect(login.headers['cache-control']).toBe('no-store');
    expect(login.headers['x-frame-options']).toBe('DENY');
  });

  it(`sign-in attempts are rate-limited per client IP: the ${LOGIN_ATTEMPTS_PER_MINUTE + 1}th in a minute answers 429 with Retry-After`, async () => {
    const { tenantId, email } = await tenantWithOwner();
    const client = agent('10.99.99.99');
    const token = client.csrfOf((await client.send('GET', '/admin/login')).body);
    const statuses: number[] = [];
    for (let i = 0; i <= LOGIN_ATTEMPTS_PER_MINUTE; i++) {
      const response = await client.send('POST', '/admin/login', {
        _csrf: token,
        tenant_id: tenantId,
        email,
        password: `guess-${i}-xxxxxxxx`,
      });
      statuses.push(response.statusCode);
      if (response.statusCode === 429) {
        expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
        expect(response.headers['content-type']).toContain('text/html');
      }
    }
    expect(statuses.slice(0, LOGIN_ATTEMPTS_PER_MINUTE).every((s) => s === 401)).toBe(true);
    expect(statuses.at(-1)).toBe(429);
    // Another address is not affected.
    expect((await agent('10.98.0.1').send('GET', '/admin/login')).statusCode).toBe(200);
  });

  it('a client cannot escape the sign-in limit by writing X-Forwarded-For: it counts per address the proxy saw', async () => {
    const { tenantId, email } = await tenantWithOwner();
    const client = agent('10.97.0.1');
    const token = client.csrfOf((await client.send('GET', '/admin/login')).body);
    const statuses: number[] = [];
    for (let i = 0; i <= LOGIN_ATTEMPTS_PER_MINUTE; i++) {
      // The proxy appends the address it saw (10.97.0.1) to what the client wrote.
      const forwarded = { 'x-forwarded-for': `198.51.100.${i + 1}, 10.97.0.1` };
      const response = await client.send(
        'POST',
        '/admin/login',
        { _csrf: token, tenant_id: tenantId, email, password: `guess-${i}-xxxxxxxx` },
        forwarded,
      );
      statuses.push(response.statusCode);
    }
    expect(statuses.slice(0, LOGIN_ATTEMPTS_PER_MINUTE).every((s) => s === 401)).toBe(true);
    expect(statuses.at(-1)).toBe(429);
  });
});
