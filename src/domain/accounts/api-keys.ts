// A tenant's API keys. The secret is shown once, at creation, and stored only as its SHA-256
// hash (DESIGN.md §3); a key is revoked for good, or locked and unlocked.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { newId, newSecret, sha256Hex } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import { isScope } from './scopes.js';
import { getTenant } from './tenant-records.js';

const KEY_PREFIX_LENGTH = 12;

const ApiKeyStatus = Type.Union([
  Type.Literal('active'),
  Type.Literal('expired'),
  Type.Literal('locked'),
  Type.Literal('revoked'),
]);
export type ApiKeyStatus = Static<typeof ApiKeyStatus>;

export const ApiKeyRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('api_key'),
    tenant_id: Type.String(),
    name: Type.String(),
    prefix: Type.String({ description: 'The first characters of the secret, to recognise it.' }),
    scopes: Type.Array(Type.String()),
    status: ApiKeyStatus,
    expires_at: Nullable(Timestamp),
    last_used_at: Nullable(Timestamp),
    locked_at: Nullable(Timestamp),
    revoked_at: Nullable(Timestamp),
    created_at: Timestamp,
  },
  { title: 'ApiKey' },
);
export type ApiKeyRecord = Static<typeof ApiKeyRecord>;

interface ApiKeyRow {
  id: string;
  tenant_id: string;
  name: string;
  prefix: string;
  scopes: string[];
  expires_at: Date | null;
  locked_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
  created_at: Date;
}

export function keyStatus(row: Pick<ApiKeyRow, 'revoked_at' | 'locked_at' | 'expires_at'>, now = Date.now()) {
  if (row.revoked_at) return 'revoked';
  if (row.locked_at) return 'locked';
  if (row.expires_at && new Date(row.expires_at).getTime() <= now) return 'expired';
  return 'active';
}

function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    object: 'api_key',
    tenant_id: row.tenant_id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes,
    status: keyStatus(row),
    expires_at: iso(row.expires_at),
    last_used_at: iso(row.last_used_at),
    locked_at: iso(row.locked_at),
    revoked_at: iso(row.revoked_at),
    created_at: iso(row.created_at),
  };
}

const KEY_COLUMNS = [
  'id',
  'tenant_id',
  'name',
  'prefix',
  'scopes',
  'expires_at',
  'locked_at',
  'revoked_at',
  'last_used_at',
  'created_at',
] as const;

export type KeyAction = 'revoke' | 'lock' | 'unlock';

export interface NewApiKey {
  name: string;
  scopes: string[];
  expires_at?: string | null | undefined;
}

/** Creates a key; the secret is in this answer only. */
export async function createApiKey(
  db: Db,
  tenantId: string,
  input: NewApiKey,
): Promise<ApiKeyRecord & { secret: string }> {
  await getTenant(db, tenantId);
  // The control plane's and the settings page's rules, here so that both keep them.
  const name = input.name.trim();
  if (name.length === 0 || name.length > 200) {
    throw new ValidationError('name', 'Give the key a name of 1 to 200 characters.');
  }
  if (input.scopes.length === 0) throw new ValidationError('scopes', 'Choose at least one scope.');
  input.scopes.forEach((scope, i) => {
    if (!isScope(scope)) throw new ValidationError(`scopes[${i}]`, `'${scope}' is not a known scope.`);
  });
  let expiresAt: Date | null = null;
  if (input.expires_at) {
    expiresAt = new Date(input.expires_at);
    // The format admits a leap second (23:59:60), which no clock here can hold.
    if (Number.isNaN(expiresAt.getTime())) {
      throw new ValidationError('expires_at', 'expires_at must be a time that exists (no leap second).');
    }
    if (expiresAt.getTime() <= Date.now()) throw new ValidationError('expires_at', 'expires_at must be in the future.');
  }
  const secret = newSecret('wsk');
  const row = await db
    .insertInto('api_keys')
    .values({
      id: newId(),
      tenant_id: tenantId,
      name,
      prefix: secret.slice(0, KEY_PREFIX_LENGTH),
      secret_hash: sha256Hex(secret),
      scopes: [...new Set(input.scopes)],
      expires_at: expiresAt,
    })
    .returning(KEY_COLUMNS)
    .executeTakeFirstOrThrow();
  return { ...toApiKeyRecord(row), secret };
}

export async function listApiKeys(db: Db, tenantId: string, page: Page) {
  await getTenant(db, tenantId);
  let query = db.selectFrom('api_keys').select(KEY_COLUMNS).where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toApiKeyRecord, (row) => row.id);
}

export async function getApiKey(db: Db, keyId: string): Promise<ApiKeyRecord> {
  const row = await db.selectFrom('api_keys').select(KEY_COLUMNS).where('id', '=', keyId).executeTakeFirst();
  if (!row) throw new NotFoundError('API key', keyId);
  return toApiKeyRecord(row);
}

/**
 * Revoke is final; lock and unlock toggle a key that is not revoked. With `tenantId` (the
 * owners' settings page), a key of another tenant is not found.
 */
export async function changeApiKeyState(
  db: Db,
  keyId: string,
  action: KeyAction,
  tenantId?: string,
): Promise<ApiKeyRecord> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('api_keys')
      .select(KEY_COLUMNS)
      .where('id', '=', keyId)
      .$if(tenantId !== undefined, (q) => q.where('tenant_id', '=', tenantId as string))
      .forUpdate()
      .executeTakeFirst();
    if (!row) throw new NotFoundError('API key', keyId);
    if (row.revoked_at && action !== 'revoke') {
      throw new ConflictError(`API key '${keyId}' is revoked; a revoked key cannot be locked or unlocked.`);
    }
    const now = new Date();
    const patch =
      action === 'revoke'
        ? { revoked_at: row.revoked_at ?? now }
        : action === 'lock'
          ? { locked_at: row.locked_at ?? now }
          : { locked_at: null };
    const updated = await trx
      .updateTable('api_keys')
      .set(patch)
      .where('id', '=', keyId)
      .returning(KEY_COLUMNS)
      .executeTakeFirstOrThrow();
    return toApiKeyRecord(updated);
  });
}

/** The key a presented secret hashes to, whatever its state (the caller judges the state). */
export async function findKeyByHash(db: Db, secretHash: string) {
  return db
    .selectFrom('api_keys')
    .select(['id', 'tenant_id', 'name', 'scopes', 'expires_at', 'locked_at', 'revoked_at'])
    .where('secret_hash', '=', secretHash)
    .executeTakeFirst();
}

export async function touchApiKeys(db: Db, keyIds: string[]): Promise<void> {
  if (keyIds.length === 0) return;
  await db.updateTable('api_keys').set({ last_used_at: new Date() }).where('id', 'in', keyIds).execute();
}
