// Tenants, their API keys (./api-keys.ts) and the operator tokens of the control plane
// (./operator-tokens.ts). Secrets are shown once, at creation, and stored only as SHA-256 hashes
// (DESIGN.md §3).
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { ConflictError, ValidationError } from '../errors.js';
import { foreignCursor, type Page, toList } from '../pagination.js';
import {
  changeApiKeyState,
  createApiKey,
  findKeyByHash,
  getApiKey,
  type KeyAction,
  listApiKeys,
  type NewApiKey,
  touchApiKeys,
} from './api-keys.js';
import { countOperatorTokens, createOperatorToken, hasOperatorToken, retireOperatorTokens } from './operator-tokens.js';
import { getTenant, type TenantRecord } from './tenant-records.js';

export { type ApiKeyRecord, type ApiKeyStatus, keyStatus, type NewApiKey } from './api-keys.js';
export type { TenantRecord } from './tenant-records.js';

export const TENANT_ID_PATTERN = '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$';
/**
 * Host labels a tenant cannot take, since its id is its host's first label (`<id>.<BASE_DOMAIN>`):
 * the admin console's (`admin`, ADMIN_BASE_URL's default) and names people expect to be the
 * service's own.
 */
export const RESERVED_TENANT_IDS: readonly string[] = [
  'admin',
  'api',
  'app',
  'auth',
  'docs',
  'help',
  'localhost',
  'login',
  'mail',
  'mcp',
  'settings',
  'static',
  'status',
  'support',
  'www',
];

async function createTenant(db: Db, input: { tenant_id: string; name: string }): Promise<TenantRecord> {
  if (RESERVED_TENANT_IDS.includes(input.tenant_id)) {
    throw new ValidationError('tenant_id', `'${input.tenant_id}' is reserved: a tenant's id is its host name.`);
  }
  try {
    const row = await db
      .insertInto('tenants')
      .values({ id: input.tenant_id, name: input.name })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { id: row.id, object: 'tenant', name: row.name, created_at: iso(row.created_at) };
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`Tenant '${input.tenant_id}' already exists.`, 'tenant_id');
    throw error;
  }
}

/** Newest first, as every list; the cursor is the last tenant shown, placed by its creation. */
async function listTenants(db: Db, page: Page) {
  let query = db
    .selectFrom('tenants')
    .selectAll()
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit + 1);
  if (page.cursor !== undefined) {
    const after = Buffer.from(page.cursor, 'base64url').toString('utf8');
    if (!new RegExp(TENANT_ID_PATTERN).test(after)) throw foreignCursor();
    query = query.where(
      sql<boolean>`(created_at, id) < (select t.created_at, t.id from tenants t where t.id = ${after})`,
    );
  }
  const rows = await query.execute();
  return toList(
    rows,
    page,
    (row): TenantRecord => ({ id: row.id, object: 'tenant', name: row.name, created_at: iso(row.created_at) }),
    (row) => row.id,
  );
}

async function countTenants(db: Db): Promise<number> {
  const row = await db.selectFrom('tenants').select(db.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

export function createTenantService({ db }: { db: Db }) {
  return {
    getTenant: (tenantId: string) => getTenant(db, tenantId),
    createTenant: (input: { tenant_id: string; name: string }) => createTenant(db, input),
    listTenants: (page: Page) => listTenants(db, page),
    countTenants: () => countTenants(db),
    createApiKey: (tenantId: string, input: NewApiKey) => createApiKey(db, tenantId, input),
    listApiKeys: (tenantId: string, page: Page) => listApiKeys(db, tenantId, page),
    getApiKey: (keyId: string) => getApiKey(db, keyId),
    changeApiKeyState: (keyId: string, action: KeyAction, tenantId?: string) =>
      changeApiKeyState(db, keyId, action, tenantId),
    findKeyByHash: (secretHash: string) => findKeyByHash(db, secretHash),
    touchApiKeys: (keyIds: string[]) => touchApiKeys(db, keyIds),
    createOperatorToken: () => createOperatorToken(db),
    hasOperatorToken: (tokenHash: string) => hasOperatorToken(db, tokenHash),
    retireOperatorTokens: () => retireOperatorTokens(db),
    countOperatorTokens: () => countOperatorTokens(db),
  };
}

export type TenantService = ReturnType<typeof createTenantService>;
