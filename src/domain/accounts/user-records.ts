// Staff users as the API answers them, with their permissions, and the reads every user change
// makes: a user by id, a user locked for a change, the staff a record names.
import type { Db } from '../../db/client.js';
import { isUuid } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';

export interface PersonSummary {
  id: string;
  name: string;
  email: string | null;
}

export interface PermissionSummary {
  id: string;
  name: string;
}

export interface UserRecord {
  id: string;
  object: 'user';
  email: string;
  name: string;
  role: string;
  permissions: PermissionSummary[];
  created_at: string;
  updated_at: string;
}

/** The staff users of a tenant among `ids`, as person summaries by id. */
export async function findStaff(db: Db, tenantId: string, ids: readonly string[]): Promise<Map<string, PersonSummary>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('users')
    .select(['id', 'name', 'email'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', [...ids])
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

type UserRow = { id: string; email: string; name: string; role: string; created_at: Date; updated_at: Date };

async function permissionsOf(db: Db, tenantId: string, userIds: string[]) {
  const byUser = new Map<string, PermissionSummary[]>();
  if (userIds.length === 0) return byUser;
  const rows = await db
    .selectFrom('user_permissions')
    .select(['id', 'user_id', 'name'])
    .where('tenant_id', '=', tenantId)
    .where('user_id', 'in', userIds)
    .orderBy('name')
    .execute();
  for (const row of rows) {
    const list = byUser.get(row.user_id) ?? [];
    list.push({ id: row.id, name: row.name });
    byUser.set(row.user_id, list);
  }
  return byUser;
}

const toUserRecord = (row: UserRow, permissions: PermissionSummary[]): UserRecord => ({
  id: row.id,
  object: 'user',
  email: row.email,
  name: row.name,
  role: row.role,
  permissions,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

const USER_COLUMNS = ['id', 'email', 'name', 'role', 'created_at', 'updated_at'] as const;

export async function readUser(db: Db, tenantId: string, userId: string): Promise<UserRecord> {
  if (!isUuid(userId)) throw new NotFoundError('user', userId);
  const row = await db
    .selectFrom('users')
    .select(USER_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', userId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('user', userId);
  return toUserRecord(row, (await permissionsOf(db, tenantId, [row.id])).get(row.id) ?? []);
}

/**
 * Locks the user row for the rest of the transaction; a user of another tenant is not found.
 * `FOR NO KEY UPDATE`: permission changes of one user take turns, and a deletion waits, while the
 * rows that name the user (a comment's mentions and notifications, by their foreign keys) are
 * written meanwhile (`FOR UPDATE` held those back until the change committed).
 */
export async function lockUser(db: Db, tenantId: string, userId: string): Promise<void> {
  if (!isUuid(userId)) throw new NotFoundError('user', userId);
  const row = await db
    .selectFrom('users')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', userId)
    .forNoKeyUpdate()
    .executeTakeFirst();
  if (!row) throw new NotFoundError('user', userId);
}

export async function permissionNames(db: Db, tenantId: string, userId: string): Promise<string[]> {
  return ((await permissionsOf(db, tenantId, [userId])).get(userId) ?? []).map((p) => p.name);
}

export async function listUsers(db: Db, tenantId: string, page: Page) {
  let query = db.selectFrom('users').select(USER_COLUMNS).where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  const rows = await query.execute();
  const permissions = await permissionsOf(
    db,
    tenantId,
    rows.map((r) => r.id),
  );
  return toList(
    rows,
    page,
    (row) => toUserRecord(row, permissions.get(row.id) ?? []),
    (row) => row.id,
  );
}
