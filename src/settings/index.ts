// The owners' settings page (spec: Authentication 5, "Keys and their scopes are managed by the
// workspace owner in the admin settings under integrations, API"):
// /admin/settings/integrations/api, server-rendered HTML with a little script.
//
// - Sign-in (/admin/login: workspace id, e-mail, password) opens a session: a random token in an
//   HttpOnly, SameSite=Lax cookie (Secure over https), stored only as its SHA-256, with an expiry
//   (./sign-in.ts).
// - Every form is CSRF-protected with @fastify/csrf-protection (a secret in an HttpOnly cookie, a
//   token in the form); a POST without a valid token answers 403. The secret is renewed at sign-in.
//   A token is also bound to the session cookie's token (the library's `userInfo`), so a CSRF
//   cookie and token from another browser or an earlier session (planted, say, from a sibling
//   subdomain) are refused for a signed-in owner.
// - Keys are created, listed, locked, unlocked and revoked through the tenant service, the same
//   code as the control plane, always for the session's own tenant (./keys.ts).
// - Cookies, form bodies and CSRF live in this plugin's scope only; the API does not see them.
//   These routes are not in the OpenAPI document and never read X-API-Key.
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import formbody from '@fastify/formbody';
import type { FastifyInstance } from 'fastify';
import { SETTINGS_CSS, SETTINGS_JS } from './assets.js';
import { COOKIE_PATH, CSRF_COOKIE, csrfUserInfo, type SettingsDeps } from './context.js';
import { settingsErrorHandler } from './errors.js';
import { registerKeys } from './keys.js';
import { SETTINGS_PATH } from './pages.js';
import { registerSignIn } from './sign-in.js';

export { CSRF_COOKIE, SESSION_COOKIE, type SettingsDeps } from './context.js';
export { LOGIN_ATTEMPTS_PER_MINUTE } from './sign-in.js';

// The HMAC key @fastify/csrf requires once tokens carry user info. It is not a secret, and the same
// in every process: what an attacker lacks is the session token, which only the owner's browser holds.
const CSRF_HMAC_KEY = 'workspace settings csrf';

export async function registerSettingsPages(app: FastifyInstance, deps: SettingsDeps): Promise<void> {
  await app.register(async (settings) => settingsPlugin(settings, deps));
}

async function settingsPlugin(settings: FastifyInstance, deps: SettingsDeps) {
  await settings.register(cookie);
  await settings.register(formbody, { bodyLimit: 64 * 1024 });
  await settings.register(csrf, {
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: COOKIE_PATH, httpOnly: true, sameSite: 'lax' },
    getUserInfo: csrfUserInfo,
    csrfOpts: { userInfo: true, hmacKey: CSRF_HMAC_KEY },
    logLevel: 'info',
  });
  settings.setErrorHandler(settingsErrorHandler(deps));

  const page = { schema: { hide: true } };
  settings.get('/admin/assets/settings.css', page, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(SETTINGS_CSS),
  );
  settings.get('/admin/assets/settings.js', page, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(SETTINGS_JS),
  );
  for (const path of ['/admin', '/admin/settings', '/admin/settings/integrations']) {
    settings.get(path, page, async (_request, reply) => reply.redirect(SETTINGS_PATH, 303));
  }

  registerSignIn(settings, deps);
  registerKeys(settings, deps);
}
