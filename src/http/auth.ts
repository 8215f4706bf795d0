// API-key authentication and tenancy (spec: Authentication; DESIGN.md §3).
// Keys are looked up by the SHA-256 of the presented secret. Lookups are cached for under a
// second, so a revoked or locked key is refused within one second on every instance while a
// busy key costs no database round trip per request; `last_used_at` is written in batches.
import type { IncomingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import { keyStatus, type TenantService } from '../domain/accounts/tenants.js';
import { DomainError, type ErrorCode } from '../domain/errors.js';
import { sameDigest, sha256Hex } from '../lib/ids.js';
import type { AuthContext } from '../operations/context.js';

interface CachedKey {
  key: Awaited<ReturnType<TenantService['findKeyByHash']>>;
  fetchedAt: number;
}

export const KEY_CACHE_TTL_MS = 900;
const KEY_CACHE_MAX = 10_000;
const USAGE_FLUSH_MS = 10_000;

/** A host name: dot-separated labels of letters, digits, hyphens and underscores, none empty. */
const HOST_NAME = /^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/;

/**
 * A Host header's name (RFC 9110 §7.2: `host [ ":" port ]`, the port digits and possibly empty):
 * lower case, without the port, and without one trailing dot (`acme.example.com.` is the same
 * host as `acme.example.com`). Undefined when it is not a host: an empty label (`acme..`, `.acme`),
 * a port that is not digits, a character no host name has.
 */
function hostName(hostHeader: string): string | undefined {
  const host = hostHeader.toLowerCase();
  if (host.startsWith('[')) {
    const literal = /^\[([^\]]+)\](?::\d*)?$/.exec(host)?.[1];
    return literal !== undefined && isIP(literal) === 6 ? literal : undefined;
  }
  const name = /^([^:]*)(?::\d*)?$/.exec(host)?.[1]?.replace(/\.$/, '');
  return name !== undefined && HOST_NAME.test(name) ? name : undefined;
}

/**
 * The tenant a request's Host names: `<tenant>.<BASE_DOMAIN>`. A bare host (BASE_DOMAIN itself,
 * localhost, an IP address, or any other name) names none (undefined), and the key's tenant is
 * used. A Host that is not a host name is null: it names no tenant, and no tenant's key or
 * session is good on it (a proxy may well route `b.example.com:x` to b's site).
 */
export function tenantFromHost(hostHeader: string | undefined, baseDomain: string): string | null | undefined {
  if (!hostHeader) return undefined;
  const host = hostName(hostHeader);
  if (host === undefined) return null;
  if (isIP(host) || host === baseDomain || host === 'localhost') return undefined;
  const suffix = `.${baseDomain}`;
  if (!host.endsWith(suffix)) return undefined;
  return host.slice(0, -suffix.length) || undefined;
}

/**
 * Whether a Host names this API: BASE_DOMAIN or a name under it, `localhost`, an IP address, or the
 * host of PUBLIC_URL. A browser page on any other name (DNS rebinding points one at us) is not ours.
 */
export function isOwnHost(hostHeader: string, baseDomain: string, publicUrl: string | undefined): boolean {
  const host = hostName(hostHeader);
  if (host === undefined) return false;
  if (isIP(host) || host === 'localhost' || host === baseDomain || host.endsWith(`.${baseDomain}`)) return true;
  return publicUrl !== undefined && host === hostName(new URL(publicUrl).host);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The key may come as `Authorization: Bearer <key>` too (the MCP endpoint: many MCP clients send only that). */
    bearerKey?: boolean;
    /** The route takes the operator's bearer token (the control plane, /metrics), not a key. */
    operator?: boolean;
  }
}

/** `Bearer <token>` (RFC 6750 §2.1; the scheme's name ignores case). */
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * The API key a request presents: its X-API-Key header, or where `bearer` allows it (the MCP
 * endpoint), `Authorization: Bearer <key>` as well. Both at once must carry the same key: two
 * different keys are refused (401 `not_authenticated` naming both headers), never one picked.
 * An Authorization of another scheme carries no key. Judged by `authenticate`, as any key.
 */
export function presentedKey(headers: IncomingHttpHeaders, bearer: boolean): string | string[] | undefined {
  const apiKey = headers['x-api-key'];
  if (!bearer) return apiKey;
  const authorization = headers.authorization;
  const token = typeof authorization === 'string' ? BEARER.exec(authorization)?.[1] : undefined;
  const sent = typeof apiKey === 'string' && apiKey.trim() !== '' ? apiKey.trim() : undefined;
  if (token === undefined && sent === undefined) {
    throw new DomainError(
      'not_authenticated',
      'No API key: send one in the X-API-Key header, or as `Authorization: Bearer <key>`.',
    );
  }
  if (token === undefined || sent === undefined || token === sent) return token ?? sent;
  throw new DomainError(
    'not_authenticated',
    'Two different API keys were sent, one in X-API-Key and one in Authorization: Bearer: send one key, in either header.',
  );
}

/** The realm of the API's keys, in `WWW-Authenticate` challenges. */
const REALM = 'workspace-api';

/**
 * The `WWW-Authenticate` challenge of a 401 (RFC 9110 §11.6.1): how the route takes credentials.
 * The MCP endpoint (`bearerKey`) takes a bearer token (RFC 6750: `error="invalid_token"` for a key
 * refused, none for a key missing) and the X-API-Key header; the operator's routes (`operator`:
 * the control plane, /metrics) its bearer token; the other routes the X-API-Key header, an `ApiKey` challenge that names
 * it (no registered scheme exists for a key in a header of its own).
 */
export function authChallenge(route: { bearerKey?: boolean; operator?: boolean } | undefined, code: ErrorCode): string {
  const invalid = code === 'invalid_api_key' ? ', error="invalid_token"' : '';
  const apiKey = `ApiKey realm="${REALM}", header="X-API-Key"`;
  if (route?.bearerKey) return `Bearer realm="${REALM}"${invalid}, ${apiKey}`;
  if (route?.operator) return `Bearer realm="workspace-admin"${invalid}`;
  return apiKey;
}

export function createAuthenticator({
  tenants,
  baseDomain,
  onError,
}: {
  tenants: TenantService;
  baseDomain: string;
  onError: (error: unknown) => void;
}) {
  const cache = new Map<string, CachedKey>();
  const used = new Set<string>();

  const flush = async () => {
    if (used.size === 0) return;
    const ids = [...used];
    used.clear();
    try {
      await tenants.touchApiKeys(ids);
    } catch (error) {
      onError(error);
    }
  };
  const timer = setInterval(flush, USAGE_FLUSH_MS);
  timer.unref();

  async function fetchKey(secretHash: string, now: number) {
    const key = await tenants.findKeyByHash(secretHash);
    if (cache.size >= KEY_CACHE_MAX) {
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) cache.delete(oldest);
    }
    cache.delete(secretHash);
    cache.set(secretHash, { key, fetchedAt: now });
    return key;
  }

  function judge(key: CachedKey['key'], hostHeader: string | undefined, touch: boolean): AuthContext {
    const hostTenant = tenantFromHost(hostHeader, baseDomain);
    if (!key || keyStatus(key) !== 'active' || (hostTenant !== undefined && hostTenant !== key.tenant_id)) {
      // One answer for every reason, so a caller learns nothing about other tenants' keys.
      throw new DomainError('invalid_api_key', 'The API key is invalid, expired, locked or revoked.');
    }
    if (touch) used.add(key.id);
    return { tenantId: key.tenant_id, keyId: key.id, keyName: key.name, scopes: key.scopes };
  }

  return {
    /**
     * Who the request is: throws (or rejects with) `not_authenticated` or `invalid_api_key`.
     * A key judged in the last second is answered at once, without a promise. `touch: false`
     * (an open stream's key judged again) does not count as a use of the key (`last_used_at`).
     */
    authenticate(
      apiKeyHeader: string | string[] | undefined,
      hostHeader: string | undefined,
      { touch = true }: { touch?: boolean } = {},
    ): AuthContext | Promise<AuthContext> {
      if (typeof apiKeyHeader !== 'string' || apiKeyHeader.trim() === '') {
        throw new DomainError('not_authenticated', 'No API key: send one in the X-API-Key header.');
      }
      const secretHash = sha256Hex(apiKeyHeader.trim());
      const now = Date.now();
      const hit = cache.get(secretHash);
      if (hit && now - hit.fetchedAt < KEY_CACHE_TTL_MS) return judge(hit.key, hostHeader, touch);
      return fetchKey(secretHash, now).then((key) => judge(key, hostHeader, touch));
    },

    /** Forgets cached lookups, so a key changed on this instance is judged afresh at once. */
    forgetAll(): void {
      cache.clear();
    },

    async close(): Promise<void> {
      clearInterval(timer);
      await flush();
    },
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;

/**
 * The operator's authentication (the control plane, /metrics): `Authorization: Bearer <operator
 * token>`, compared as digests in constant time. With ADMIN_TOKEN set it is the one token (a
 * generated one, stored as a hash, no longer opens anything); without it, the stored ones are.
 */
export function operatorCheck({
  tenants,
  adminToken,
}: {
  tenants?: Pick<TenantService, 'hasOperatorToken'>;
  adminToken?: string | undefined;
}) {
  const adminTokenHash = adminToken ? sha256Hex(adminToken) : undefined;
  return async (request: { headers: IncomingHttpHeaders }): Promise<void> => {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw new DomainError('not_authenticated', 'No operator token: send `Authorization: Bearer <token>`.');
    }
    const hash = sha256Hex(match[1]);
    if (adminTokenHash ? sameDigest(hash, adminTokenHash) : await tenants?.hasOperatorToken(hash)) return;
    throw new DomainError('invalid_api_key', 'The operator token is not valid.');
  };
}
