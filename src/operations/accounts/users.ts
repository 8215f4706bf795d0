// Users and permissions (scope `accounts`; DESIGN.md §7, users; spec: "Other operations named in
// product updates", Authentication 7). The Admin rule lives in src/domain/accounts/roles.ts, so these
// operations and the MCP tools made from them (`upsert_user`, `add_user_permissions`,
// `remove_user_permission`) all refuse it.
import { Type } from '@sinclair/typebox';
import { Notification } from '../../domain/accounts/notifications.js';
import { User } from '../../domain/accounts/user-records.js';
import { DEFAULT_ROLE, PERMISSIONS, ROLES } from '../../domain/accounts/users.js';
import { checkBulkItems } from '../../domain/errors.js';
import { Deleted, ListOf, ListQuery, PathName, Uuid } from '../../domain/shapes.js';
import { defineOperation, withStatus } from '../registry.js';

const catalogue = (entries: Record<string, string>) =>
  Object.entries(entries)
    .map(([name, meaning]) => `\`${name}\` (${meaning.replace(/\.$/, '')})`)
    .join('; ');

const ROLE_TEXT = `One of: ${catalogue(ROLES)}. Case and surrounding spaces are ignored. \`admin\` is refused.`;
const PERMISSION_TEXT = `One of: ${catalogue(PERMISSIONS)}. Case and surrounding spaces are ignored. \`admin\` is refused.`;

const PermissionName = Type.String({ minLength: 1, maxLength: 100, description: PERMISSION_TEXT });

const UserParams = Type.Object({ user_id: Uuid });

export const userOperations = [
  defineOperation({
    id: 'upsertUser',
    method: 'POST',
    path: '/api/v1/users',
    scope: 'accounts:write',
    tag: 'Users',
    summary: 'Create or update a user',
    description:
      'Creates the staff user with this e-mail, or updates it when one exists (e-mails match case-insensitively). ' +
      'Fields left out keep their value; a new user gets the role `' +
      DEFAULT_ROLE +
      '` and, without a name, the part of the e-mail before `@`. `permissions`, when sent, becomes the whole set. ' +
      'Answers 201 with a new user, 200 with an updated one. The API can never grant Admin status: `admin` as a ' +
      'role or a permission, in any spelling, is refused with 422 `validation_error`.',
    body: Type.Object(
      {
        email: Type.String({ format: 'email', maxLength: 254 }),
        name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
        role: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: ROLE_TEXT })),
        permissions: Type.Optional(
          Type.Array(PermissionName, { maxItems: 100, description: 'The whole set the user should hold.' }),
        ),
      },
      { additionalProperties: false },
    ),
    response: User,
    status: 201,
    alsoStatus: [200],
    idempotent: true,
    errors: ['missing_required_parameter'],
    handler: async ({ tenantId, body, services }) => {
      const { created, user } = await services.users.upsertUser(tenantId, body);
      return withStatus(created ? 201 : 200, user);
    },
  }),
  defineOperation({
    id: 'listUsers',
    method: 'GET',
    path: '/api/v1/users',
    scope: 'accounts:read',
    tag: 'Users',
    summary: 'List users',
    description: 'Lists the staff users of the workspace with their permissions, newest first.',
    query: ListQuery,
    response: ListOf(User),
    handler: ({ tenantId, query, services }) => services.users.listUsers(tenantId, query),
  }),
  defineOperation({
    id: 'getUser',
    method: 'GET',
    path: '/api/v1/users/:user_id',
    scope: 'accounts:read',
    tag: 'Users',
    summary: 'Get a user',
    description: 'Returns one staff user, including the permissions they hold now.',
    params: UserParams,
    response: User,
    handler: ({ tenantId, params, services }) => services.users.getUser(tenantId, params.user_id),
  }),
  defineOperation({
    id: 'addUserPermissions',
    method: 'POST',
    writes: 'update',
    path: '/api/v1/users/:user_id/permissions',
    scope: 'accounts:write',
    tag: 'Users',
    summary: 'Add permissions to a user',
    description:
      'Adds permissions on top of the ones the user holds; one already held changes nothing. Returns the user. ' +
      '`admin` is refused with 422 `validation_error`: the API can never grant Admin status.',
    params: UserParams,
    body: Type.Object(
      { permissions: Type.Array(PermissionName, { description: '1 to 100 permission names.' }) },
      { additionalProperties: false },
    ),
    response: User,
    idempotent: true,
    errors: ['missing_required_parameter', 'empty_items', 'too_many_items'],
    handler: ({ tenantId, params, body, services }) => {
      checkBulkItems('permissions', body.permissions);
      return services.users.addPermissions(tenantId, params.user_id, body.permissions);
    },
  }),
  defineOperation({
    id: 'removeUserPermission',
    method: 'DELETE',
    path: '/api/v1/users/:user_id/permissions/:permission_id',
    scope: 'accounts:write',
    tag: 'Users',
    summary: 'Remove a permission from a user',
    description:
      'Removes one permission from the user, named by its `id` (as listed on the user) or by its name. ' +
      'A permission the user does not hold answers 404.',
    params: Type.Object({
      user_id: Uuid,
      permission_id: PathName({
        maxLength: 100,
        description: 'The permission `id` listed on the user, or the permission name.',
      }),
    }),
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) =>
      services.users.removePermission(tenantId, params.user_id, params.permission_id),
  }),
  defineOperation({
    id: 'listUserNotifications',
    method: 'GET',
    path: '/api/v1/users/:user_id/notifications',
    scope: 'accounts:read',
    tag: 'Users',
    summary: "List a user's notifications",
    description: 'Lists the notifications of a staff user (mentions in task comments), newest first.',
    params: UserParams,
    query: ListQuery,
    response: ListOf(Notification),
    handler: ({ tenantId, params, query, services }) =>
      services.users.listNotifications(tenantId, params.user_id, query),
  }),
];
