// Staff users of a workspace, their permissions and their notifications (DESIGN.md §7, users).
// Users are matched by e-mail, case-insensitively. Roles and permissions come from a fixed
// catalogue without Admin (./roles.ts); users are read in ./user-records.ts and changed in
// ./user-writes.ts.
import type { Db } from '../../db/index.js';
import type { Page } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import { listNotifications } from './notifications.js';
import { listUsers, readUser } from './user-records.js';
import { addPermissions, removePermission, type UserInput, upsertUser } from './user-writes.js';

export type { NotificationRecord } from './notifications.js';
export {
  checkPermissions,
  checkRole,
  DEFAULT_ROLE,
  PERMISSIONS,
  type PermissionName,
  ROLES,
  type Role,
  spellsAdmin,
} from './roles.js';
export {
  findStaff,
  lockUser,
  type PermissionSummary,
  PersonSummary,
  type UserRecord,
} from './user-records.js';
export type { UserInput } from './user-writes.js';

export function createUserService({ db, emitEvent }: { db: Db; emitEvent?: EmitEvent }) {
  const deps = { db, emitEvent };
  return {
    upsertUser: (tenantId: string, input: UserInput) => upsertUser(deps, tenantId, input),
    listUsers: (tenantId: string, page: Page) => listUsers(db, tenantId, page),
    getUser: (tenantId: string, userId: string) => readUser(db, tenantId, userId),
    addPermissions: (tenantId: string, userId: string, values: readonly string[]) =>
      addPermissions(deps, tenantId, userId, values),
    removePermission: (tenantId: string, userId: string, permission: string) =>
      removePermission(deps, tenantId, userId, permission),
    listNotifications: (tenantId: string, userId: string, page: Page) => listNotifications(db, tenantId, userId, page),
  };
}

export type UserService = ReturnType<typeof createUserService>;
