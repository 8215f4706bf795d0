// Changes to staff users: the upsert by e-mail and the grant and removal of permissions, each in
// a transaction with its webhook event.
import type { Db } from '../../db/index.js';
import { isUuid, newId } from '../../lib/ids.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EmitEvent } from '../webhooks/events.js';
import { checkPermissions, checkRole, DEFAULT_ROLE } from './roles.js';
import { lockUser, permissionNames, readUser, type UserRecord } from './user-records.js';

export interface UserDeps {
  db: Db;
  emitEvent?: EmitEvent | undefined;
}

export interface UserInput {
  email: string;
  name?: string | undefined;
  role?: string | undefined;
  permissions?: string[] | undefined;
}

async function grant(db: Db, tenantId: string, userId: string, names: readonly string[]): Promise<number> {
  if (names.length === 0) return 0;
  const inserted = await db
    .insertInto('user_permissions')
    .values(names.map((name) => ({ id: newId(), tenant_id: tenantId, user_id: userId, name })))
    .onConflict((oc) => oc.columns(['user_id', 'name']).doNothing())
    .returning('id')
    .execute();
  return inserted.length;
}

/** `user.permissions.changed` when the user's permissions differ from `before`. */
async function emitPermissionChanges(
  emitEvent: EmitEvent | undefined,
  trx: Db,
  tenantId: string,
  user: UserRecord,
  before: readonly string[],
) {
  const after = user.permissions.map((p) => p.name);
  const added = after.filter((name) => !before.includes(name));
  const removed = before.filter((name) => !after.includes(name));
  if (added.length + removed.length === 0) return;
  await emitEvent?.(trx, tenantId, 'user.permissions.changed', { user, added, removed });
}

/**
 * Creates the user with this e-mail (case-insensitive), or updates it: fields sent replace
 * the stored ones, fields left out stay. `permissions`, when sent, becomes the user's whole
 * set. One statement decides create or update, so concurrent upserts of one e-mail make one user.
 */
export async function upsertUser(
  { db, emitEvent }: UserDeps,
  tenantId: string,
  input: UserInput,
): Promise<{ created: boolean; user: UserRecord }> {
  const role = input.role === undefined ? undefined : checkRole(input.role);
  const permissions = input.permissions === undefined ? undefined : checkPermissions(input.permissions);
  const email = input.email.trim();
  const name = input.name?.trim();
  if (name === '') throw new ValidationError('name', 'name must not be blank.');
  return db.transaction().execute(async (trx) => {
    const id = newId();
    const now = new Date();
    const row = await trx
      .insertInto('users')
      .values({
        id,
        tenant_id: tenantId,
        email,
        // A person summary's name is a string (spec: task comment): the e-mail's local part
        // stands in until a name is given.
        name: name ?? email.slice(0, email.lastIndexOf('@')),
        role: role ?? DEFAULT_ROLE,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc.columns(['tenant_id', 'email_key']).doUpdateSet((eb) => ({
          email: eb.ref('excluded.email'),
          name: name === undefined ? eb.ref('users.name') : eb.ref('excluded.name'),
          role: role === undefined ? eb.ref('users.role') : eb.ref('excluded.role'),
          updated_at: now,
        })),
      )
      .returning('id')
      .executeTakeFirstOrThrow();
    // The permissions held before, to report what an update changed (webhook event).
    const held = row.id === id ? [] : await permissionNames(trx, tenantId, row.id);
    if (permissions !== undefined) {
      let removal = trx.deleteFrom('user_permissions').where('tenant_id', '=', tenantId).where('user_id', '=', row.id);
      if (permissions.length > 0) removal = removal.where('name', 'not in', permissions);
      await removal.execute();
      await grant(trx, tenantId, row.id, permissions);
    }
    const user = await readUser(trx, tenantId, row.id);
    // Webhook event, in this transaction: sent exactly when the user exists.
    if (row.id === id) await emitEvent?.(trx, tenantId, 'user.created', { user });
    else await emitPermissionChanges(emitEvent, trx, tenantId, user, held);
    return { created: row.id === id, user };
  });
}

/** Adds permissions on top of the user's; one already held changes nothing. */
export async function addPermissions(
  { db, emitEvent }: UserDeps,
  tenantId: string,
  userId: string,
  values: readonly string[],
): Promise<UserRecord> {
  const names = checkPermissions(values);
  return db.transaction().execute(async (trx) => {
    await lockUser(trx, tenantId, userId);
    const held = await permissionNames(trx, tenantId, userId);
    if ((await grant(trx, tenantId, userId, names)) > 0) {
      await touchUser(trx, tenantId, userId);
    }
    const user = await readUser(trx, tenantId, userId);
    await emitPermissionChanges(emitEvent, trx, tenantId, user, held);
    return user;
  });
}

/** Removes one permission, named by its id (as listed on the user) or by its catalogue name. */
export async function removePermission(
  { db, emitEvent }: UserDeps,
  tenantId: string,
  userId: string,
  permission: string,
) {
  // A name ignores case and surrounding spaces, as when permissions are added.
  const ref = permission.trim();
  const byId = isUuid(ref);
  return db.transaction().execute(async (trx) => {
    await lockUser(trx, tenantId, userId);
    const removed = await trx
      .deleteFrom('user_permissions')
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .where(byId ? 'id' : 'name', '=', ref.toLowerCase())
      .returning(['id', 'name'])
      .executeTakeFirst();
    if (!removed) throw new NotFoundError('permission of this user', permission);
    await touchUser(trx, tenantId, userId);
    await emitEvent?.(trx, tenantId, 'user.permissions.changed', {
      user: await readUser(trx, tenantId, userId),
      added: [],
      removed: [removed.name],
    });
    return { id: removed.id, object: 'deleted' as const, deleted: true };
  });
}

/** Marks the user changed now (its permissions changed). */
async function touchUser(db: Db, tenantId: string, userId: string): Promise<void> {
  await db
    .updateTable('users')
    .set({ updated_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', userId)
    .execute();
}
