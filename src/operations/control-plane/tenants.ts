// The control plane (DESIGN.md §2): the operator manages tenants, their owners and their API keys
// under /admin/v1 with `Authorization: Bearer <operator token>` (ADMIN_TOKEN, or a token generated
// at first start and stored as a hash). The `workspace` CLI calls these operations over HTTP.
import { Type } from '@sinclair/typebox';
import { ApiKeyRecord } from '../../domain/accounts/api-keys.js';
import {
  checkOwnerInput,
  EMAIL_PATTERN,
  OwnerRecord,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
} from '../../domain/accounts/owners.js';
import { ALL_SCOPES } from '../../domain/accounts/scopes.js';
import { TenantRecord } from '../../domain/accounts/tenant-records.js';
import { TENANT_ID_PATTERN } from '../../domain/accounts/tenants.js';
import { ListOf, ListQuery, Nullable, Timestamp, Uuid } from '../../domain/shapes.js';
import { defineOperatorOperation } from '../registry.js';

const NewApiKey = Type.Object(
  { ...ApiKeyRecord.properties, secret: Type.String({ description: 'The key itself; shown in this answer only.' }) },
  { title: 'NewApiKey' },
);

const OwnerInput = Type.Object(
  {
    email: Type.String({ pattern: EMAIL_PATTERN, maxLength: 254 }),
    password: Type.Optional(
      Type.String({
        minLength: PASSWORD_MIN_LENGTH,
        maxLength: PASSWORD_MAX_LENGTH,
        description: 'Generated, and returned once as `owner_password`, when absent.',
      }),
    ),
  },
  { additionalProperties: false },
);
const OwnerPassword = Type.Optional(
  Type.String({ description: 'The generated password of the owner; in this answer only, when none was sent.' }),
);
const NewTenant = Type.Object(
  {
    ...TenantRecord.properties,
    owner: Type.Optional(OwnerRecord),
    owner_password: OwnerPassword,
  },
  { title: 'NewTenant' },
);
const NewOwner = Type.Object({ ...OwnerRecord.properties, password: OwnerPassword }, { title: 'NewOwner' });

const TenantParams = Type.Object({ tenant_id: Type.String({ pattern: TENANT_ID_PATTERN }) });
const KeyParams = Type.Object({ key_id: Uuid });

const title = (action: string) => `${action[0]?.toUpperCase()}${action.slice(1)}`;

const KEY_ACTIONS = {
  revoke: 'Revokes the key for good; it is refused everywhere within one second.',
  lock: 'Locks the key until it is unlocked; it is refused everywhere within one second.',
  unlock: 'Unlocks a locked key. A revoked key cannot be unlocked (409).',
} as const;

export const controlPlaneOperations = [
  defineOperatorOperation({
    id: 'adminCreateTenant',
    method: 'POST',
    path: '/admin/v1/tenants',
    summary: 'Create a tenant',
    description:
      'Creates a workspace: `tenant_id` becomes the label of its own host ({tenant_id}.BASE_DOMAIN). With ' +
      '`owner`, its first owner comes with it (their password generated and returned once as ' +
      '`owner_password` when none is sent). A `tenant_id` already taken answers 409.',
    body: Type.Object(
      {
        tenant_id: Type.String({
          pattern: TENANT_ID_PATTERN,
          description: 'Lowercase letters, digits and hyphens; it becomes the host label.',
        }),
        name: Type.String({ minLength: 1, maxLength: 200 }),
        owner: Type.Optional(
          Type.Object(OwnerInput.properties, {
            additionalProperties: false,
            description: 'The workspace owner, who signs in to /admin/settings/integrations/api.',
          }),
        ),
      },
      { additionalProperties: false },
    ),
    response: NewTenant,
    status: 201,
    errors: ['conflict', 'missing_required_parameter'],
    handler: async ({ body, services, controlPlane }) => {
      // The owner is checked first: a refused owner leaves no tenant behind (a retry would be a 409).
      if (body.owner) checkOwnerInput(body.owner, 'owner.');
      const tenant = await services.tenants.createTenant({ tenant_id: body.tenant_id, name: body.name });
      if (!body.owner) return tenant;
      const { owner, generatedPassword } = await controlPlane.owners.createOwner(tenant.id, body.owner);
      return { ...tenant, owner, ...(generatedPassword ? { owner_password: generatedPassword } : {}) };
    },
  }),
  defineOperatorOperation({
    id: 'adminCreateOwner',
    method: 'POST',
    path: '/admin/v1/tenants/:tenant_id/owners',
    summary: 'Add a workspace owner',
    description:
      'Adds an owner who signs in to the settings page (/admin/settings/integrations/api) to manage the ' +
      "tenant's API keys. Without `password`, one is generated and returned once. An e-mail already " +
      'owning this tenant answers 409.',
    params: TenantParams,
    body: OwnerInput,
    response: NewOwner,
    status: 201,
    errors: ['conflict', 'missing_required_parameter'],
    handler: async ({ params, body, controlPlane }) => {
      const { owner, generatedPassword } = await controlPlane.owners.createOwner(params.tenant_id, body);
      return { ...owner, ...(generatedPassword ? { password: generatedPassword } : {}) };
    },
  }),
  defineOperatorOperation({
    id: 'adminListTenants',
    method: 'GET',
    path: '/admin/v1/tenants',
    summary: 'List tenants',
    description: 'Every tenant of this deployment, newest first, a page at a time (`limit`, `cursor`).',
    query: ListQuery,
    response: ListOf(TenantRecord),
    handler: ({ query, services }) => services.tenants.listTenants(query),
  }),
  defineOperatorOperation({
    id: 'adminGetTenant',
    method: 'GET',
    path: '/admin/v1/tenants/:tenant_id',
    summary: 'Get a tenant',
    description: 'One tenant by its id; an unknown id answers 404.',
    params: TenantParams,
    response: TenantRecord,
    handler: ({ params, services }) => services.tenants.getTenant(params.tenant_id),
  }),
  defineOperatorOperation({
    id: 'adminCreateApiKey',
    method: 'POST',
    path: '/admin/v1/tenants/:tenant_id/api-keys',
    summary: 'Create an API key',
    description: `Scopes are taken from the fixed catalogue: ${ALL_SCOPES.join(', ')}. The secret is returned once.`,
    params: TenantParams,
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 200 }),
        scopes: Type.Array(Type.String(), { maxItems: ALL_SCOPES.length }),
        expires_at: Type.Optional(Nullable(Timestamp)),
      },
      { additionalProperties: false },
    ),
    response: NewApiKey,
    status: 201,
    errors: ['missing_required_parameter'],
    handler: ({ params, body, services }) => services.tenants.createApiKey(params.tenant_id, body),
  }),
  defineOperatorOperation({
    id: 'adminListApiKeys',
    method: 'GET',
    path: '/admin/v1/tenants/:tenant_id/api-keys',
    summary: 'List the API keys of a tenant',
    description:
      "The tenant's API keys, a page at a time (`limit`, `cursor`): name, scopes, status and the secret's " +
      'first characters, never the secret itself.',
    params: TenantParams,
    query: ListQuery,
    response: ListOf(ApiKeyRecord),
    handler: ({ params, query, services }) => services.tenants.listApiKeys(params.tenant_id, query),
  }),
  defineOperatorOperation({
    id: 'adminGetApiKey',
    method: 'GET',
    path: '/admin/v1/api-keys/:key_id',
    summary: 'Get an API key',
    description: 'One API key by its id, of any tenant (without its secret); an unknown id answers 404.',
    params: KeyParams,
    response: ApiKeyRecord,
    handler: ({ params, services }) => services.tenants.getApiKey(params.key_id),
  }),
  ...(Object.keys(KEY_ACTIONS) as (keyof typeof KEY_ACTIONS)[]).map((action) =>
    defineOperatorOperation({
      id: `admin${title(action)}ApiKey`,
      method: 'POST',
      path: `/admin/v1/api-keys/:key_id/${action}`,
      summary: `${title(action)} an API key`,
      description: KEY_ACTIONS[action],
      params: KeyParams,
      response: ApiKeyRecord,
      errors: ['conflict'],
      handler: async ({ params, services, controlPlane }) => {
        const key = await services.tenants.changeApiKeyState(params.key_id, action);
        controlPlane.keysChanged();
        return key;
      },
    }),
  ),
];
