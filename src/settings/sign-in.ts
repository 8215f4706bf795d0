// Signing in and out: a sign-in opens a session, its token in an HttpOnly, SameSite=Lax cookie
// (Secure over https), and renews the CSRF secret; signing out ends the session.
import type { FastifyInstance } from 'fastify';
import {
  COOKIE_PATH,
  CSRF_COOKIE,
  csrfToken,
  type Form,
  field,
  hostTenant,
  html,
  isHttps,
  SESSION_COOKIE,
  type SettingsDeps,
  sessionOf,
} from './context.js';
import { LOGIN_PATH, loginPage, SETTINGS_PATH } from './pages.js';

/** Sign-in attempts per client IP and minute (the API's own limit, if lower, wins). */
export const LOGIN_ATTEMPTS_PER_MINUTE = 10;
const GENERIC_LOGIN_ERROR = 'Wrong workspace, e-mail or password.';

export function registerSignIn(settings: FastifyInstance, deps: SettingsDeps): void {
  const { config, owners } = deps;
  const page = { schema: { hide: true } };
  const guarded = { ...page, preHandler: settings.csrfProtection };

  settings.get(LOGIN_PATH, page, async (request, reply) => {
    if (await sessionOf(deps, request)) return reply.redirect(SETTINGS_PATH, 303);
    // A Host that is not a host name (null) fixes no workspace: every sign-in on it is refused.
    const host = hostTenant(config, request);
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
      const host = hostTenant(config, request);
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
    const session = await sessionOf(deps, request);
    if (session) await owners.deleteSession(session.tenantId, session.id);
    reply.clearCookie(SESSION_COOKIE, { path: COOKIE_PATH });
    reply.clearCookie(CSRF_COOKIE, { path: COOKIE_PATH });
    return reply.redirect(LOGIN_PATH, 303);
  });
}
