// The control plane (DESIGN.md §2): the operator manages tenants and their API keys under
// /admin/v1 with `Authorization: Bearer <operator token>` (ADMIN_TOKEN, or a token generated at
// first start and stored as a hash). The `workspace` CLI talks to these routes over HTTP.
import { type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  checkOwnerInput,
  EMAIL_PATTERN,
  type OwnerService,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
} from '../domain/accounts/owners.js';
import { ALL_SCOPES } from '../domain/accounts/scopes.js';
import { TENANT_ID_PATTERN, type TenantService } from '../domain/accounts/tenants.js';
import { DomainError } from '../domain/errors.js';
import { ListOf, ListQuery, Nullable, Timestamp, Uuid } from '../domain/shapes.js';
import type { Authenticator } from '../http/auth.js';
import { ERROR_CATALOGUE } from '../http/errors.js';
import { hookList } from '../http/hooks.js';
import { sameDigest, sha256Hex } from '../lib/ids.js';
import { refuseBody } from '../operations/registry.js';

const Tenant = Type.Object(
  { id: Type.String(), object: Type.Literal('tenant'), name: Type.String(), created_at: Timestamp },
  { title: 'Tenant' },
);

const ApiKeyProperties = {
  id: Uuid,
  object: Type.Literal('api_key'),
  tenant_id: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the secret, to recognise it.' }),
  scopes: Type.Array(Type.String()),
  status: Type.Union(['active', 'expired', 'locked', 'revoked'].map((s) => Type.Literal(s))),
  expires_at: Nullable(Timestamp),
  last_used_at: Nullable(Timestamp),
  locked_at: Nullable(Timestamp),
  revoked_at: Nullable(Timestamp),
  created_at: Timestamp,
};
const ApiKey = Type.Object(ApiKeyProperties, { title: 'ApiKey' });
const NewApiKey = Type.Object(
  { ...ApiKeyProperties, secret: Type.String({ description: 'The key itself; shown in this answer only.' }) },
  { title: 'NewApiKey' },
);

// Workspace owners: they sign in to /admin/settings/integrations/api to manage keys.
const Owner = Type.Object(
  { id: Uuid, object: Type.Literal('owner'), tenant_id: Type.String(), email: Type.String(), created_at: Timestamp },
  { title: 'Owner' },
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
    ...Tenant.properties,
    owner: Type.Optional(Owner),
    owner_password: OwnerPassword,
  },
  { title: 'NewTenant' },
);
const NewOwner = Type.Object({ ...Owner.properties, password: OwnerPassword }, { title: 'NewOwner' });

const TenantParams = Type.Object({ tenant_id: Type.String({ pattern: TENANT_ID_PATTERN }) });
const KeyParams = Type.Object({ key_id: Uuid });

/** What every control-plane route can answer (the body limit and the rate limit apply here too), and its own. */
function responses(success: Record<number, TSchema>, ...codes: (keyof typeof ERROR_CATALOGUE)[]) {
  const out: Record<number, TSchema> = { ...success };
  const common = [
    'bad_request',
    'not_authenticated',
    'validation_error',
    'request_too_large',
    'rate_limit_exceeded',
    'internal_error',
    'service_unavailable',
  ] as const;
  for (const code of [...common, ...codes]) {
    out[ERROR_CATALOGUE[code].status] = Type.Ref('Error');
  }
  return out;
}

const common = { tags: ['Control plane'], security: [{ OperatorToken: [] }] };

export function registerAdminRoutes(
  app: FastifyInstance,
  {
    tenants,
    authenticator,
    adminToken,
    owners,
  }: { tenants: TenantService; authenticator: Authenticator; adminToken?: string; owners?: OwnerService },
): void {
  const adminTokenHash = adminToken ? sha256Hex(adminToken) : undefined;

  async function requireOperator(request: FastifyRequest): Promise<void> {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw new DomainError('not_authenticated', 'No operator token: send `Authorization: Bearer <token>`.');
    }
    const hash = sha256Hex(match[1]);
    // With ADMIN_TOKEN set, it is the one token: a generated one (stored) no longer opens anything.
    if (adminTokenHash ? sameDigest(hash, adminTokenHash) : await tenants.hasOperatorToken(hash)) return;
    throw new DomainError('invalid_api_key', 'The operator token is not valid.');
  }

  app.register(async (admin) => {
    // A route hook, after the rate limit's (which is one too and runs first): an instance hook would
    // run before it, so a wrong token would be refused uncounted and could be guessed without end.
    admin.addHook('onRoute', (route) => {
      route.onRequest = [...hookList(route.onRequest), requireOperator];
    });

    admin.post(
      '/admin/v1/tenants',
      {
        schema: {
          ...common,
          operationId: 'adminCreateTenant',
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
          response: responses({ 201: NewTenant }, 'conflict', 'missing_required_parameter'),
        },
      },
      async (request, reply) => {
        const body = request.body as { tenant_id: string; name: string; owner?: { email: string; password?: string } };
        // The owner is checked first: a refused owner leaves no tenant behind (a retry would be a 409).
        if (body.owner && owners) checkOwnerInput(body.owner, 'owner.');
        const tenant = await tenants.createTenant({ tenant_id: body.tenant_id, name: body.name });
        reply.code(201);
        if (!body.owner || !owners) return tenant;
        const { owner, generatedPassword } = await owners.createOwner(tenant.id, body.owner);
        return { ...tenant, owner, ...(generatedPassword ? { owner_password: generatedPassword } : {}) };
      },
    );

    admin.post(
      '/admin/v1/tenants/:tenant_id/owners',
      {
        schema: {
          ...common,
          operationId: 'adminCreateOwner',
          summary: 'Add a workspace owner',
          description:
            'Adds an owner who signs in to the settings page (/admin/settings/integrations/api) to manage the ' +
            "tenant's API keys. Without `password`, one is generated and returned once. An e-mail already " +
            'owning this tenant answers 409.',
          params: TenantParams,
          body: OwnerInput,
          response: responses({ 201: NewOwner }, 'not_found', 'conflict', 'missing_required_parameter'),
        },
      },
      async (request, reply) => {
        if (!owners) throw new DomainError('not_found', 'Owner accounts are not enabled on this server.');
        const { tenant_id } = request.params as { tenant_id: string };
        const { owner, generatedPassword } = await owners.createOwner(
          tenant_id,
          request.body as { email: string; password?: string },
        );
        reply.code(201);
        return { ...owner, ...(generatedPassword ? { password: generatedPassword } : {}) };
      },
    );

    admin.get(
      '/admin/v1/tenants',
      {
        schema: {
          ...common,
          operationId: 'adminListTenants',
          summary: 'List tenants',
          description: 'Every tenant of this deployment, newest first, a page at a time (`limit`, `cursor`).',
          querystring: ListQuery,
          response: responses({ 200: ListOf(Tenant) }),
        },
      },
      async (request) => tenants.listTenants(request.query as { limit: number; cursor?: string }),
    );

    admin.get(
      '/admin/v1/tenants/:tenant_id',
      {
        schema: {
          ...common,
          operationId: 'adminGetTenant',
          summary: 'Get a tenant',
          description: 'One tenant by its id; an unknown id answers 404.',
          params: TenantParams,
          response: responses({ 200: Tenant }, 'not_found'),
        },
      },
      async (request) => tenants.getTenant((request.params as { tenant_id: string }).tenant_id),
    );

    admin.post(
      '/admin/v1/tenants/:tenant_id/api-keys',
      {
        schema: {
          ...common,
          operationId: 'adminCreateApiKey',
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
          response: responses({ 201: NewApiKey }, 'not_found', 'missing_required_parameter'),
        },
      },
      async (request, reply) => {
        const { tenant_id } = request.params as { tenant_id: string };
        const key = await tenants.createApiKey(tenant_id, request.body as { name: string; scopes: string[] });
        reply.code(201);
        return key;
      },
    );

    admin.get(
      '/admin/v1/tenants/:tenant_id/api-keys',
      {
        schema: {
          ...common,
          operationId: 'adminListApiKeys',
          summary: 'List the API keys of a tenant',
          description:
            "The tenant's API keys, a page at a time (`limit`, `cursor`): name, scopes, status and the secret's " +
            'first characters, never the secret itself.',
          params: TenantParams,
          querystring: ListQuery,
          response: responses({ 200: ListOf(ApiKey) }, 'not_found'),
        },
      },
      async (request) =>
        tenants.listApiKeys(
          (request.params as { tenant_id: string }).tenant_id,
          request.query as { limit: number; cursor?: string },
        ),
    );

    admin.get(
      '/admin/v1/api-keys/:key_id',
      {
        schema: {
          ...common,
          operationId: 'adminGetApiKey',
          summary: 'Get an API key',
          description: 'One API key by its id, of any tenant (without its secret); an unknown id answers 404.',
          params: KeyParams,
          response: responses({ 200: ApiKey }, 'not_found'),
        },
      },
      async (request) => tenants.getApiKey((request.params as { key_id: string }).key_id),
    );

    for (const action of ['revoke', 'lock', 'unlock'] as const) {
      admin.post(
        `/admin/v1/api-keys/:key_id/${action}`,
        {
          schema: {
            ...common,
            operationId: `admin${action[0]?.toUpperCase()}${action.slice(1)}ApiKey`,
            summary: `${action[0]?.toUpperCase()}${action.slice(1)} an API key`,
            description:
              action === 'revoke'
                ? 'Revokes the key for good; it is refused everywhere within one second.'
                : action === 'lock'
                  ? 'Locks the key until it is unlocked; it is refused everywhere within one second.'
                  : 'Unlocks a locked key. A revoked key cannot be unlocked (409).',
            params: KeyParams,
            response: responses({ 200: ApiKey }, 'not_found', 'conflict'),
          },
          // No body: one sent (an array, `true`, a field) is refused rather than ignored, as over the API.
          preValidation: refuseBody,
        },
        async (request) => {
          const key = await tenants.changeApiKeyState((request.params as { key_id: string }).key_id, action);
          authenticator.forgetAll();
          return key;
        },
      );
    }
  });
}
