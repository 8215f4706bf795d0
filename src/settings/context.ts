// What every settings route uses: the cookies' names and path, reading form fields, the CSRF
// token's binding, answering a page, and the signed-in owner.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import type { DatabaseOutages } from '../db/index.js';
import type { OwnerService, OwnerSession } from '../domain/accounts/owners.js';
import type { TenantService } from '../domain/accounts/tenants.js';
import { type Authenticator, tenantFromHost } from '../http/auth.js';

export const SESSION_COOKIE = 'ws_session';
export const CSRF_COOKIE = 'ws_csrf';
export const COOKIE_PATH = '/admin';

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

export interface SettingsDeps {
  config: Config;
  tenants: TenantService;
  owners: OwnerService;
  authenticator: Authenticator;
  /** Told of a page that failed for want of the database (logged once per outage). */
  outages?: Pick<DatabaseOutages, 'failed'>;
}

export type Form = Record<string, string | string[] | undefined>;

/**
 * A form field as text, trimmed; a value that is not text (a JSON body may send one) reads as
 * absent. `raw` keeps the spaces, as a password's are its own.
 */
// A value holding a NUL (only a crafted request sends one; no text column can store it) is read
// as not sent: a sign-in then fails as any other, a form is refused naming what is missing.
const storable = (value: string) => !value.includes('\u0000');

export function field(form: Form | undefined, name: string, { raw = false } = {}): string {
  const value = form?.[name];
  const first = Array.isArray(value) ? value[0] : value;
  if (typeof first !== 'string' || !storable(first)) return '';
  return raw ? first : first.trim();
}

export function fields(form: Form | undefined, name: string): string[] {
  const value = form?.[name];
  return (value === undefined ? [] : Array.isArray(value) ? value : [value]).filter(storable);
}

/**
 * What a CSRF token is bound to: the session cookie's token, or, with no session cookie (the
 * sign-in form), a fixed text. The cookie is taken as sent, known to the database or not, so the
 * page and the POST that follows it read the same value; a token made for one session, or for none,
 * is refused with another.
 */
export function csrfUserInfo(request: FastifyRequest): string {
  const token = request.cookies[SESSION_COOKIE];
  return token ? `session ${token}` : 'no session';
}

export const isHttps = (request: FastifyRequest) => request.protocol === 'https';

/** A page in HTML, with the headers every settings page carries. */
export const html = (reply: FastifyReply, status: number, body: string) =>
  reply.code(status).headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(body);

/** A CSRF token for the form the reply carries, bound to the request's session cookie. */
export const csrfToken = (reply: FastifyReply) =>
  reply.generateCsrf({ secure: isHttps(reply.request), userInfo: csrfUserInfo(reply.request) });

/** The tenant a request's host names, as `tenantFromHost` reads it. */
export const hostTenant = (config: Config, request: FastifyRequest) =>
  tenantFromHost(request.headers.host, config.baseDomain);

/** The signed-in owner, or undefined (no cookie, unknown or expired session, another tenant's host). */
export async function sessionOf(
  { config, owners }: Pick<SettingsDeps, 'config' | 'owners'>,
  request: FastifyRequest,
): Promise<OwnerSession | undefined> {
  const token = request.cookies[SESSION_COOKIE];
  if (!token) return undefined;
  const session = await owners.findSession(token);
  if (!session) return undefined;
  const host = hostTenant(config, request);
  return host === undefined || host === session.tenantId ? session : undefined;
}
