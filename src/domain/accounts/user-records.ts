// Staff users as the API answers them, with their permissions, and the reads every user change
// makes: a user by id, a user locked for a change, the staff a record names.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { isUuid } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import { ROLES } from './roles.js';

/** A staff user, or the API key that wrote a comment, as records name them. */
export const PersonSummary = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    email: Nullable(Type.String({ description: 'Null for an integration (an API key), which has none.' })),
  },
  { title: 'PersonSummary' },
);

export type PersonSummary = Static<typeof PersonSummary>;

export const Permission = Type.Object(
  {
    id: Uuid,
    name: Type.String({ description: 'A name from the permission catalogue.' }),
  },
  { title: 'Permission' },
);

export type PermissionSummary = Static<typeof Permission>;

/** A user as the API answers it: the operations' response schema, and the record's type. */
export const User = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('user'),
    email: Type.String(),
    name: Type.String(),
    role: Type.String({ description: `The user's role: ${Object.keys(ROLES).join(', ')}.` }),
    permissions: Type.Array(Permission, { description: 'The permissions the user holds now, by name.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'User' },
);

export type UserRecord = Static<typeof User>;

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
