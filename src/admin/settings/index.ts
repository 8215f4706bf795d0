// The owners' settings page (spec: Authentication 5, "Keys and their scopes are managed by the
// workspace owner in the admin settings under integrations, API"):
// /admin/settings/integrations/api, server-rendered HTML with a little script.
//
// - Sign-in (/admin/login: workspace id, e-mail, password) opens a session: a random token in an
//   HttpOnly, SameSite=Lax cookie (Secure over https), stored only as its SHA-256, with an expiry.
// - Every form is CSRF-protected with @fastify/csrf-protection (a secret in an HttpOnly cookie, a
//   token in the form); a POST without a valid token answers 403. The secret is renewed at sign-in.
//   A token is also bound to the session cookie's token (the library's `userInfo`), so a CSRF
//   cookie and token from another browser or an earlier session (planted, say, from a sibling
//   subdomain) are refused for a signed-in owner.
// - Keys are created, listed, locked, unlocked and revoked through the tenant service, the same
//   code as the control plane, always for the session's own tenant.
// - Cookies, form bodies and CSRF live in this plugin's scope only; the API does not see them.
//   These routes are not in the OpenAPI document and never read X-API-Key.
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import { isDatabaseUnreachable } from '../../db/errors.js';
import type { DatabaseOutages } from '../../db/outage.js';
import type { OwnerService, OwnerSession } from '../../domain/accounts/owners.js';
import { SCOPE_RESOURCES } from '../../domain/accounts/scopes.js';
import type { TenantService } from '../../domain/accounts/tenants.js';
import { DomainError } from '../../domain/errors.js';
import { type Authenticator, tenantFromHost } from '../../http/auth.js';
import { ERROR_CATALOGUE, summarize, UNAVAILABLE_RETRY_AFTER_S } from '../../http/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { startsWithCalendarDate } from '../../lib/time.js';
import { SETTINGS_CSS, SETTINGS_JS } from './assets.js';
import { errorPage, type KeysPageInput, keysPage, LOGIN_PATH, loginPage, SETTINGS_PATH } from './pages.js';

export const SESSION_COOKIE = 'ws_session';
export const CSRF_COOKIE = 'ws_csrf';
/** Sign-in attempts per client IP and minute (the API's own limit, if lower, wins). */
export const LOGIN_ATTEMPTS_PER_MINUTE = 10;
const COOKIE_PATH = '/admin';
// The HMAC key @fastify/csrf requires once tokens carry user info. It is not a secret, and the same
// in every process: what an attacker lacks is the session token, which only the owner's browser holds.
const CSRF_HMAC_KEY = 'workspace settings csrf';
const GENERIC_LOGIN_ERROR = 'Wrong workspace, e-mail or password.';
const ACTIONS = ['revoke', 'lock', 'unlock'] as const;
const NOTICES: Record<(typeof ACTIONS)[number], string> = {
  revoke: 'The key was revoked: the API refuses it from now on.',
  lock: 'The key was locked: the API refuses it until you unlock it.',
  unlock: 'The key was unlocked.',
};

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

type Form = Record<string, string | string[] | undefined>;

/**
 * A form field as text, trimmed; a value that is not text (a JSON body may send one) reads as
 * absent. `raw` keeps the spaces, as a password's are its own.
 */
// A value holding a NUL (only a crafted request sends one; no text column can store it) is read
// as not sent: a sign-in then fails as any other, a form is refused naming what is missing.
const storable = (value: string) => !value.includes('\u0000');

function field(form: Form | undefined, name: string, { raw = false } = {}): string {
  const value = form?.[name];
  const first = Array.isArray(value) ? value[0] : value;
  if (typeof first !== 'string' || !storable(first)) return '';
  return raw ? first : first.trim();
}

function fields(form: Form | undefined, name: string): string[] {
  const value = form?.[name];
  return (value === undefined ? [] : Array.isArray(value) ? value : [value]).filter(storable);
}

/**
 * What a CSRF token is bound to: the session cookie's token, or, with no session cookie (the
 * sign-in form), a fixed text. The cookie is taken as sent, known to the database or not, so the
 * page and the POST that follows it read the same value; a token made for one session, or for none,
 * is refused with another.
 */
function csrfUserInfo(request: FastifyRequest): string {
  const token = request.cookies[SESSION_COOKIE];
  return token ? `session ${token}` : 'no session';
}

export interface SettingsDeps {
  config: Config;
  tenants: TenantService;
  owners: OwnerService;
  authenticator: Authenticator;
  /** Told of a page that failed for want of the database (logged once per outage). */
  outages?: Pick<DatabaseOutages, 'failed'>;
}

export async function registerSettingsPages(app: FastifyInstance, deps: SettingsDeps): Promise<void> {
  await app.register(async (settings) => settingsPlugin(settings, deps));
}

async function settingsPlugin(
  settings: FastifyInstance,
  { config, tenants, owners, authenticator, outages }: SettingsDeps,
) {
  await settings.register(cookie);
  await settings.register(formbody, { bodyLimit: 64 * 1024 });
  await settings.register(csrf, {
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: COOKIE_PATH, httpOnly: true, sameSite: 'lax' },
    getUserInfo: csrfUserInfo,
    csrfOpts: { userInfo: true, hmacKey: CSRF_HMAC_KEY },
    logLevel: 'info',
  });

  const isHttps = (request: FastifyRequest) => request.protocol === 'https';
  const hostTenant = (request: FastifyRequest) => tenantFromHost(request.headers.host, config.baseDomain);
  const csrfToken = (reply: FastifyReply) =>
    reply.generateCsrf({ secure: isHttps(reply.request), userInfo: csrfUserInfo(reply.request) });
  const html = (reply: FastifyReply, status: number, body: string) =>
    reply.code(status).headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(body);

  /** The signed-in owner, or undefined (no cookie, unknown or expired session, another tenant's host). */
  async function sessionOf(request: FastifyRequest): Promise<OwnerSession | undefined> {
    const token = request.cookies[SESSION_COOKIE];
    if (!token) return undefined;
    const session = await owners.findSession(token);
    if (!session) return undefined;
    const host = hostTenant(request);
    return host === undefined || host === session.tenantId ? session : undefined;
  }

  // Pages answer in HTML, errors included; a 429 keeps its Retry-After.
  settings.setErrorHandler(async (error: FastifyError, request, reply) => {
    let status = 500;
    let message = 'An unexpected error occurred. Please try again.';
    if (error instanceof DomainError) {
      status = ERROR_CATALOGUE[error.code].status;
      message = error.message;
    } else if (isDatabaseUnreachable(error)) {
      outages?.failed(error);
      reply.header('retry-after', UNAVAILABLE_RETRY_AFTER_S);
      return html(reply, 503, errorPage(503, 'The service is briefly unavailable. Please try again in a few seconds.'));
    } else if (error.code === 'FST_CSRF_INVALID_TOKEN' || error.code === 'FST_CSRF_MISSING_SECRET') {
      status = 403;
      message = 'This form has expired or did not come from this page. Reload the page and try again.';
    } else if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
      status = error.statusCode;
      message = 'The request could not be understood.';
    }
    if (status >= 500) {
      const eventId = newId();
      request.log.error({ err: summarize(error), event_id: eventId }, 'settings page failed');
      message = `${message} (event ${eventId})`;
    }
    return html(reply, status, errorPage(status, message));
  });

  const page = { schema: { hide: true } };
  const guarded = { ...page, preHandler: settings.csrfProtection };

  settings.get('/admin/assets/settings.css', page, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(SETTINGS_CSS),
  );
  settings.get('/admin/assets/settings.js', page, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(SETTINGS_JS),
  );

  for (const path of ['/admin', '/admin/settings', '/admin/settings/integrations']) {
    settings.get(path, page, async (_request, reply) => reply.redirect(SETTINGS_PATH, 303));
  }

  settings.get(LOGIN_PATH, page, async (request, reply) => {
    if (await sessionOf(request)) return reply.redirect(SETTINGS_PATH, 303);
    // A Host that is not a host name (null) fixes no workspace: every sign-in on it is refused.
    const host = hostTenant(request);
    return html(reply, 200, loginPage({ csrf: csrfToken(reply), tenantId: host ?? undefined, tenantFixed: !!host }));
  });

  settings.post(
    LOGIN_PATH,
    {
      ...guarded,
      config: {
        rateLimit: { max: Math.min(LOGIN_ATTEMPTS_PER_MINUTE, config.rateLimitPerMinute), timeWindow: 60_000 },
      },
    },
    async (request, reply) => {
      const form = request.body as Form | undefined;
      const tenantId = field(form, 'tenant_id').toLowerCase();
      const email = field(form, 'email');
      const password = field(form, 'password', { raw: true });
      const host = hostTenant(request);
      const owner =
        tenantId && email && password && (host === undefined || host === tenantId)
          ? await owners.checkCredentials(tenantId, email, password)
          : undefined;
      if (!owner) {
        request.log.info({ tenant_id: tenantId }, 'owner sign-in refused');
        return html(
          reply,
          401,
          loginPage({
            csrf: csrfToken(reply),
            tenantId,
            email,
            error: GENERIC_LOGIN_ERROR,
            tenantFixed: !!host,
          }),
        );
      }
      const session = await owners.createSession(owner.tenant_id, owner.id);
      reply.setCookie(SESSION_COOKIE, session.token, {
        path: COOKIE_PATH,
        httpOnly: true,
        sameSite: 'lax',
        secure: isHttps(request),
        expires: session.expiresAt,
      });
      // A fresh CSRF secret for the signed-in session: tokens from before the sign-in stop working.
      reply.clearCookie(CSRF_COOKIE, { path: COOKIE_PATH });
      return reply.redirect(SETTINGS_PATH, 303);
    },
  );

  settings.post('/admin/logout', guarded, async (request, reply) => {
    const session = await sessionOf(request);
    if (session) await owners.deleteSession(session.tenantId, session.id);
    reply.clearCookie(SESSION_COOKIE, { path: COOKIE_PATH });
    reply.clearCookie(CSRF_COOKIE, { path: COOKIE_PATH });
    return reply.redirect(LOGIN_PATH, 303);
  });

  async function renderKeys(
    reply: FastifyReply,
    session: OwnerSession,
    status: number,
    extra: Partial<KeysPageInput> & { cursor?: string | undefined } = {},
  ) {
    const { cursor, ...rest } = extra;
    const list = await tenants.listApiKeys(session.tenantId, { limit: 100, ...(cursor ? { cursor } : {}) });
    return html(
      reply,
      status,
      keysPage({
        email: session.email,
        tenantId: session.tenantId,
        csrf: csrfToken(reply),
        keys: list.data,
        nextCursor: list.next_cursor,
        resources: SCOPE_RESOURCES,
        ...rest,
      }),
    );
  }

  settings.get(SETTINGS_PATH, page, async (request, reply) => {
    const session = await sessionOf(request);
    if (!session) return reply.redirect(LOGIN_PATH, 303);
    const query = request.query as { cursor?: string; done?: string };
    const done = ACTIONS.find((a) => a === query.done);
    return await renderKeys(reply, session, 200, {
      cursor: typeof query.cursor === 'string' ? query.cursor : undefined,
      notice: done ? NOTICES[done] : undefined,
    });
  });

  settings.post(`${SETTINGS_PATH}/keys`, guarded, async (request, reply) => {
    const session = await sessionOf(request);
    if (!session) return reply.redirect(LOGIN_PATH, 303);
    const form = request.body as Form | undefined;
    const name = field(form, 'name');
    const scopes = [...new Set(fields(form, 'scopes'))];
    const expiresOn = field(form, 'expires_on');
    const values = { name, scopes, expires_on: expiresOn };
    const refuse = (message: string) => renderKeys(reply, session, 422, { error: message, form: values });

    // The key's name and scopes are judged where the control plane's are (createApiKey).
    let expiresAt: string | null = null;
    if (expiresOn) {
      if (expiresOn.length !== 10 || !startsWithCalendarDate(expiresOn)) {
        return refuse('The expiry date must be a date (YYYY-MM-DD).');
      }
      expiresAt = `${expiresOn}T23:59:59.999Z`;
    }
    try {
      const created = await tenants.createApiKey(session.tenantId, { name, scopes, expires_at: expiresAt });
      request.log.info({ tenant_id: session.tenantId, key_id: created.id }, 'API key created on the settings page');
      return await renderKeys(reply, session, 201, { created });
    } catch (error) {
      if (error instanceof DomainError && ERROR_CATALOGUE[error.code].status === 422) return refuse(error.message);
      throw error;
    }
  });

  settings.post(`${SETTINGS_PATH}/keys/:key_id/:action`, guarded, async (request, reply) => {
    const session = await sessionOf(request);
    if (!session) return reply.redirect(LOGIN_PATH, 303);
    const { key_id: keyId, action: raw } = request.params as { key_id: string; action: string };
    const action = ACTIONS.find((a) => a === raw);
    if (!action || !isUuid(keyId)) throw new DomainError('not_found', 'No such key.');
    try {
      await tenants.changeApiKeyState(keyId, action, session.tenantId);
    } catch (error) {
      if (error instanceof DomainError && error.code === 'conflict') {
        return await renderKeys(reply, session, 409, { error: error.message });
      }
      throw error;
    }
    authenticator.forgetAll();
    request.log.info({ tenant_id: session.tenantId, key_id: keyId, action }, 'API key changed on the settings page');
    return reply.redirect(`${SETTINGS_PATH}?done=${action}`, 303);
  });
}
