// Staff users of a workspace, their permissions and their notifications (DESIGN.md §7, users).
// Users are matched by e-mail, case-insensitively. Roles and permissions come from a fixed
// catalogue, and Admin is never among them: "The API can never grant Admin status to a user"
// (spec: Authentication 7). That rule lives here once, so every path that writes a role or a
// permission (POST /users, POST /users/{id}/permissions, and the MCP tools built from the same
// operations) refuses it; the database repeats it in check constraints (migration 0005).
import type { Db } from '../../db/client.js';
import { isUuid, newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';

/** Roles a user can hold. A role is a label for people; what a user may do is its permissions. */
export const ROLES = {
  agent: 'Answers conversations and works on tasks. The default for a new user.',
  supervisor: 'Oversees agents: reassigns conversations, reviews knowledge and analytics.',
  viewer: 'Reads conversations, knowledge and analytics without changing them.',
} as const;

export type Role = keyof typeof ROLES;
export const DEFAULT_ROLE: Role = 'agent';

/** Permissions a user can be granted. There is deliberately no Admin permission. */
export const PERMISSIONS = {
  'conversations.view': 'Read conversations and their messages.',
  'conversations.reply': 'Reply to customers in conversations.',
  'conversations.assign': 'Assign conversations to agents and teams.',
  'tickets.manage': 'Handle, reassign and close handoff tickets.',
  'knowledge.view': 'Read sources, documents and knowledge update requests.',
  'knowledge.edit': 'Edit documents and review knowledge update requests.',
  'tasks.view': 'Read tasks, their comments and links.',
  'tasks.manage': 'Create tasks, comment on them and link them.',
  'analytics.view': 'Read dashboards and reports.',
  'simulations.run': 'Create simulation datasets and start runs.',
  'workflows.manage': 'Create workflows and enable or disable them.',
  'agents.manage': 'Configure agents and their handoffs.',
} as const;

export type PermissionName = keyof typeof PERMISSIONS;

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

export interface NotificationRecord {
  id: string;
  object: 'notification';
  type: string;
  user_id: string;
  task_id: string | null;
  comment_id: string | null;
  message: string;
  created_at: string;
}

export interface UserInput {
  email: string;
  name?: string | undefined;
  role?: string | undefined;
  permissions?: string[] | undefined;
}

/**
 * Whether a value spells Admin in any way: any casing, surrounding or inner whitespace,
 * separators (`ad-min`, `workspace.admin`), full-width or other compatibility forms, invisible
 * characters. Such values get a message saying why; anything else outside the catalogue is refused
 * as unknown, so a look-alike that escapes this test is refused all the same.
 */
export function spellsAdmin(value: string): boolean {
  return value
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^a-z]/g, '')
    .includes('admin');
}

const ADMIN_REFUSED = 'The API can never grant Admin status; Admin is managed in the admin console only.';

/** The catalogue role a value names (case and surrounding whitespace ignored), or a `validation_error`. */
export function checkRole(value: string, param = 'role'): Role {
  if (spellsAdmin(value)) throw new ValidationError(param, `${param}: ${ADMIN_REFUSED}`);
  const role = value.trim().toLowerCase();
  if (!Object.hasOwn(ROLES, role)) {
    throw new ValidationError(param, `${param} must be one of: ${Object.keys(ROLES).join(', ')}.`);
  }
  return role as Role;
}

/** The catalogue permissions a list names, without repeats, or a `validation_error` naming the item. */
export function checkPermissions(values: readonly string[], param = 'permissions'): PermissionName[] {
  const names = new Set<PermissionName>();
  values.forEach((value, i) => {
    const at = `${param}[${i}]`;
    if (spellsAdmin(value)) throw new ValidationError(at, `${at}: ${ADMIN_REFUSED}`);
    const name = value.trim().toLowerCase();
    if (!Object.hasOwn(PERMISSIONS, name)) {
      throw new ValidationError(at, `${at} is not a known permission; see the permission catalogue.`);
    }
    names.add(name as PermissionName);
  });
  return [...names];
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

async function readUser(db: Db, tenantId: string, userId: string): Promise<UserRecord> {
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

async function permissionNames(db: Db, tenantId: string, userId: string): Promise<string[]> {
  return ((await permissionsOf(db, tenantId, [userId])).get(userId) ?? []).map((p) => p.name);
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

export function createUserService({ db, emitEvent }: { db: Db; emitEvent?: EmitEvent }) {
  /** `user.permissions.changed` when the user's permissions differ from `before`. */
  async function emitPermissionChanges(trx: Db, tenantId: string, user: UserRecord, before: readonly string[]) {
    const after = user.permissions.map((p) => p.name);
    const added = after.filter((name) => !before.includes(name));
    const removed = before.filter((name) => !after.includes(name));
    if (added.length + removed.length === 0) return;
    await emitEvent?.(trx, tenantId, 'user.permissions.changed', { user, added, removed });
  }

  return {
    /**
     * Creates the user with this e-mail (case-insensitive), or updates it: fields sent replace
     * the stored ones, fields left out stay. `permissions`, when sent, becomes the user's whole
     * set. One statement decides create or update, so concurrent upserts of one e-mail make one user.
     */
    async upsertUser(tenantId: string, input: UserInput): Promise<{ created: boolean; user: UserRecord }> {
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
          let removal = trx
            .deleteFrom('user_permissions')
            .where('tenant_id', '=', tenantId)
            .where('user_id', '=', row.id);
          if (permissions.length > 0) removal = removal.where('name', 'not in', permissions);
          await removal.execute();
          await grant(trx, tenantId, row.id, permissions);
        }
        const user = await readUser(trx, tenantId, row.id);
        // Webhook event, in this transaction: sent exactly when the user exists.
        if (row.id === id) await emitEvent?.(trx, tenantId, 'user.created', { user });
        else await emitPermissionChanges(trx, tenantId, user, held);
        return { created: row.id === id, user };
      });
    },

    async listUsers(tenantId: string, page: Page) {
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
    },

    getUser: (tenantId: string, userId: string) => readUser(db, tenantId, userId),

    /** Adds permissions on top of the user's; one already held changes nothing. */
    async addPermissions(tenantId: string, userId: string, values: readonly string[]): Promise<UserRecord> {
      const names = checkPermissions(values);
      return db.transaction().execute(async (trx) => {
        await lockUser(trx, tenantId, userId);
        const held = await permissionNames(trx, tenantId, userId);
        if ((await grant(trx, tenantId, userId, names)) > 0) {
          await trx
            .updateTable('users')
            .set({ updated_at: new Date() })
            .where('tenant_id', '=', tenantId)
            .where('id', '=', userId)
            .execute();
        }
        const user = await readUser(trx, tenantId, userId);
        await emitPermissionChanges(trx, tenantId, user, held);
        return user;
      });
    },

    /** Removes one permission, named by its id (as listed on the user) or by its catalogue name. */
    async removePermission(tenantId: string, userId: string, permission: string) {
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
        await trx
          .updateTable('users')
          .set({ updated_at: new Date() })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', userId)
          .execute();
        await emitEvent?.(trx, tenantId, 'user.permissions.changed', {
          user: await readUser(trx, tenantId, userId),
          added: [],
          removed: [removed.name],
        });
        return { id: removed.id, object: 'deleted' as const, deleted: true };
      });
    },

    /** The user's notifications (mentions in task comments), newest first. */
    async listNotifications(tenantId: string, userId: string, page: Page) {
      await readUser(db, tenantId, userId);
      let query = db
        .selectFrom('notifications')
        .select(['id', 'type', 'user_id', 'task_id', 'comment_id', 'message', 'created_at'])
        .where('tenant_id', '=', tenantId)
        .where('user_id', '=', userId);
      query = newestFirst(query, page);
      return toList(
        await query.execute(),
        page,
        (row): NotificationRecord => ({ ...row, object: 'notification', created_at: iso(row.created_at) }),
        (row) => row.id,
      );
    },
  };
}

export type UserService = ReturnType<typeof createUserService>;
