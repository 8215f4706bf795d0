// The API keys page: keys are created, listed, locked, unlocked and revoked through the tenant
// service, the same code as the control plane, always for the session's own tenant.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { OwnerSession } from '../domain/accounts/owners.js';
import { SCOPE_RESOURCES } from '../domain/accounts/scopes.js';
import { DomainError } from '../domain/errors.js';
import { isUuid } from '../lib/ids.js';
import { startsWithCalendarDate } from '../lib/time.js';
import { ERROR_CATALOGUE } from '../operations/errors.js';
import { csrfToken, type Form, field, fields, html, type SettingsDeps, sessionOf } from './context.js';
import { type KeysPageInput, keysPage, LOGIN_PATH, SETTINGS_PATH } from './pages.js';

const ACTIONS = ['revoke', 'lock', 'unlock'] as const;
const NOTICES: Record<(typeof ACTIONS)[number], string> = {
  revoke: 'The key was revoked: the API refuses it from now on.',
  lock: 'The key was locked: the API refuses it until you unlock it.',
  unlock: 'The key was unlocked.',
};

/** The keys page of the session's tenant, a page of 100 keys from `cursor`. */
async function renderKeys(
  { tenants }: SettingsDeps,
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

export function registerKeys(settings: FastifyInstance, deps: SettingsDeps): void {
  const page = { schema: { hide: true } };
  const guarded = { ...page, preHandler: settings.csrfProtection };

  settings.get(SETTINGS_PATH, page, async (request, reply) => {
    const session = await sessionOf(deps, request);
    if (!session) return reply.redirect(LOGIN_PATH, 303);
    const query = request.query as { cursor?: string; done?: string };
    const done = ACTIONS.find((a) => a === query.done);
    return await renderKeys(deps, reply, session, 200, {
      cursor: typeof query.cursor === 'string' ? query.cursor : undefined,
      notice: done ? NOTICES[done] : undefined,
    });
  });

  settings.post(`${SETTINGS_PATH}/keys`, guarded, async (request, reply) => {
    const session = await sessionOf(deps, request);
    if (!session) return reply.redirect(LOGIN_PATH, 303);
    const form = request.body as Form | undefined;
    const name = field(form, 'name');
    const scopes = [...new Set(fields(form, 'scopes'))];
    const expiresOn = field(form, 'expires_on');
    const values = { name, scopes, expires_on: expiresOn };
    const refuse = (message: string) => renderKeys(deps, reply, session, 422, { error: message, form: values });

    // The key's name and scopes are judged where the control plane's are (createApiKey).
    let expiresAt: string | null = null;
    if (expiresOn) {
      if (expiresOn.length !== 10 || !startsWithCalendarDate(expiresOn)) {
        return refuse('The expiry date must be a date (YYYY-MM-DD).');
      }
      expiresAt = `${expiresOn}T23:59:59.999Z`;
    }
    try {
      const created = await deps.tenants.createApiKey(session.tenantId, { name, scopes, expires_at: expiresAt });
      request.log.info({ tenant_id: session.tenantId, key_id: created.id }, 'API key created on the settings page');
      return await renderKeys(deps, reply, session, 201, { created });
    } catch (error) {
      if (error instanceof DomainError && ERROR_CATALOGUE[error.code].status === 422) return refuse(error.message);
      throw error;
    }
  });

  settings.post(`${SETTINGS_PATH}/keys/:key_id/:action`, guarded, async (request, reply) => {
    const session = await sessionOf(deps, request);
    if (!session) return reply.redirect(LOGIN_PATH, 303);
    const { key_id: keyId, action: raw } = request.params as { key_id: string; action: string };
    const action = ACTIONS.find((a) => a === raw);
    if (!action || !isUuid(keyId)) throw new DomainError('not_found', 'No such key.');
    try {
      await deps.tenants.changeApiKeyState(keyId, action, session.tenantId);
    } catch (error) {
      if (error instanceof DomainError && error.code === 'conflict') {
        return await renderKeys(deps, reply, session, 409, { error: error.message });
      }
      throw error;
    }
    deps.authenticator.forgetAll();
    request.log.info({ tenant_id: session.tenantId, key_id: keyId, action }, 'API key changed on the settings page');
    return reply.redirect(`${SETTINGS_PATH}?done=${action}`, 303);
  });
}
