// The service documents itself: the OpenAPI 3.1.0 document at /api/v1/openapi.json, an
// interactive reference at /docs, and the error reference at /docs/errors that every error's
// `doc_url` points into. These answers, large and read by browsers, are compressed; the API's are not.
import compress from '@fastify/compress';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { openApiWebhooks } from '../domain/webhooks/event-types.js';
import { ERROR_CATALOGUE } from '../operations/errors.js';
import type { Operation } from '../operations/registry.js';
import { errorCataloguePage } from './error-page.js';
import { NOT_STORED_STATUSES } from './idempotency.js';
import { API_DESCRIPTION, API_LICENSE, apiContact, documentTags, scopeList } from './openapi-metadata.js';

export const API_VERSION = '1.0.0';

/** The API key, with the scope catalogue in `x-scopes` (an extension: an API-key scheme has no OAuth flows). */
const API_KEY_SCHEME = {
  type: 'apiKey' as const,
  in: 'header' as const,
  name: 'X-API-Key',
  description:
    'An API key of the tenant. Its scopes, from a fixed catalogue (listed in `x-scopes`), are named in each ' +
    "operation's security requirement; a write scope includes its read scope.",
  'x-scopes': scopeList(),
};

export async function registerOpenApi(
  app: FastifyInstance,
  { operations, config }: { operations: Operation[]; config: Pick<Config, 'baseDomain' | 'publicUrl'> },
): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      servers: servers(config),
      info: {
        title: 'Workspace API',
        version: API_VERSION,
        description: API_DESCRIPTION,
        contact: apiContact(config.publicUrl),
        license: API_LICENSE,
      },
      // OpenAPI 3.1 `webhooks`: every event type we send, with its payload.
      webhooks: unauthenticatedWebhooks(openApiWebhooks()),
      components: {
        securitySchemes: {
          ScopedAPIKeyAuth: API_KEY_SCHEME,
          OperatorToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'The operator token of the control plane (/admin/v1): ADMIN_TOKEN, or one generated at start.',
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    transformObject: (documents) =>
      'openapiObject' in documents
        ? withTags(
            withResponseHeaders(
              withIdempotency(optionalDefaults(withEventStreams(documents.openapiObject, operations))),
            ),
          )
        : documents.swaggerObject,
  });
}

/**
 * Where the paths are served (docs/api.md: Tenancy). First the host this document was read from (a
 * relative URL): the interactive reference at /docs tries requests there, so they reach the
 * server showing it. Then `{base_url}`, a tenant's own host, as the spec has it; then PUBLIC_URL
 * when this deployment knows its public origin.
 */
function servers({ baseDomain, publicUrl }: Pick<Config, 'baseDomain' | 'publicUrl'>) {
  const anyHost =
    "On a host that names no tenant (BASE_DOMAIN itself, localhost, an IP address) the key's tenant is used.";
  return [
    { url: '/', description: `The host serving this document. ${anyHost}` },
    {
      url: 'https://{tenant_id}.{base_domain}',
      description:
        `A tenant's own host ({base_url}): the key must belong to that tenant. ${anyHost} ` +
        'The control plane (/admin/v1) answers on any of these hosts.',
      variables: {
        tenant_id: {
          default: 'demo',
          description: 'The tenant id: lowercase letters, digits and hyphens (the first start makes `demo`).',
        },
        base_domain: { default: baseDomain, description: "The deployment's BASE_DOMAIN." },
      },
    },
    ...(publicUrl ? [{ url: publicUrl, description: `This deployment's public origin (PUBLIC_URL). ${anyHost}` }] : []),
  ];
}

/**
 * The events are requests this server sends, not ones it takes: no security scheme applies
 * (`security: []`); the receiver checks their Standard Webhooks signature headers instead.
 */
function unauthenticatedWebhooks<T extends Record<string, { post: object }>>(webhooks: T): T {
  for (const item of Object.values(webhooks)) Object.assign(item.post, { security: [] });
  return webhooks;
}

/** The tags the operations and webhooks use, declared at the top with what each covers. */
function withTags<T extends { paths?: unknown; webhooks?: unknown }>(document: T): T {
  const used = [document.paths, document.webhooks].flatMap((items) =>
    Object.values((items ?? {}) as Record<string, Record<string, { tags?: string[] }>>).flatMap((item) =>
      Object.values(item ?? {}).flatMap((operation) => operation?.tags ?? []),
    ),
  );
  return Object.assign(document, { tags: documentTags(used) });
}

interface DocumentedOperation {
  operationId?: string;
  security?: Record<string, unknown>[];
  parameters?: Record<string, unknown>[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: { required?: unknown[] } }> };
  responses?: Record<
    string,
    { description?: string; headers?: Record<string, unknown>; content?: Record<string, unknown> }
  >;
}

const operationsOf = (document: { paths?: unknown }) =>
  Object.values((document.paths ?? {}) as Record<string, Record<string, DocumentedOperation>>).flatMap((item) =>
    Object.entries(item ?? {}),
  );

/**
 * An operation that streams its answer when asked (`eventStream`): its success answer is also
 * `text/event-stream`, after `application/json`, so a generated client knows not to parse it as JSON.
 */
function withEventStreams<T extends { paths?: unknown }>(document: T, operations: Operation[]): T {
  const streams = new Map(operations.flatMap((op) => (op.eventStream ? [[op.id, op]] : [])));
  for (const [, operation] of operationsOf(document)) {
    const op = operation.operationId === undefined ? undefined : streams.get(operation.operationId);
    const success = op && operation.responses?.[String(op.status ?? 200)];
    if (!op || !success) continue;
    success.content = {
      ...success.content,
      'text/event-stream': { schema: { type: 'string', description: op.eventStream } },
    };
  }
  return document;
}

const headerRef = (name: keyof typeof RESPONSE_HEADERS) => ({ $ref: `#/components/headers/${name}` });

/**
 * What src/http/idempotency.ts does, in the document: every POST taking an API key takes an
 * `Idempotency-Key` header, and an answer that may be a replay carries `Idempotent-Replayed`:
 * any with a body the operation itself gave (not a 5xx, nor a refusal before it ran:
 * NOT_STORED_STATUSES), so not the 409 or 422 that only the key's own checks answer. And a body none of whose fields is
 * required may be left out (it reads as `{}`).
 */
function withIdempotency<T extends { paths?: unknown }>(document: T): T {
  for (const item of Object.values((document.paths ?? {}) as Record<string, Record<string, DocumentedOperation>>)) {
    for (const [method, operation] of Object.entries(item ?? {})) {
      const body = operation.requestBody;
      if (body?.required && !body.content?.['application/json']?.schema?.required?.length) body.required = false;
      if (method !== 'post' || !operation.security?.some((scheme) => 'ScopedAPIKeyAuth' in scheme)) continue;
      operation.parameters = [
        ...(operation.parameters ?? []),
        {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'Makes a retry safe: the first answer (below 500) is kept for 24 hours and replayed for a repeat ' +
            'by the same API key with the same path and body; the same key with another request or from another ' +
            'API key, or while the first runs, answers ' +
            '409 `conflict`, and a key that is not 1 to 255 characters 422 `validation_error` (both with ' +
            '`param: "Idempotency-Key"`).',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
      ];
      const responses = operation.responses ?? {};
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) >= 500 || NOT_STORED_STATUSES.includes(Number(status))) continue;
        if (response.content === undefined) continue; // an empty answer (202) is not stored either
        response.headers = { ...response.headers, 'Idempotent-Replayed': headerRef('Idempotent-Replayed') };
      }
      // Listed where the operation has no 409 or 422 of its own. The shared error responses
      // (withResponseHeaders) take their place, so the parameter says when the key answers them.
      for (const status of ['409', '422']) {
        responses[status] ??= {
          description: 'See the Idempotency-Key parameter.',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        };
      }
    }
  }
  return document;
}

/** The response headers the server sends (docs/api.md: Rate limits, Request ids, Idempotency), declared once. */
const RESPONSE_HEADERS = {
  'X-Request-Id': {
    description:
      'On every answer: the request’s own `X-Request-Id` when well formed (`[A-Za-z0-9._:-]{1,128}`), else a new ' +
      'UUID; the server’s log lines carry the same id.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': {
    description: 'Requests a client IP may make in a window of a minute (RATE_LIMIT_PER_MINUTE).',
    schema: { type: 'integer' },
  },
  'RateLimit-Remaining': {
    description: 'Requests left to this client IP in the current window.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Reset': { description: 'Seconds until the current window ends.', schema: { type: 'integer', minimum: 0 } },
  'Retry-After': { description: 'Whole seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
  'Idempotent-Replayed': {
    description: '`true` when this answer is a replay of the first one under the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
};

type DocumentedResponse = NonNullable<DocumentedOperation['responses']>[string];

/** A response that is the spec's error body and nothing else of its own. */
const isPlainError = (response: DocumentedResponse) =>
  Object.keys(response).every((key) => ['description', 'content', 'headers'].includes(key)) &&
  JSON.stringify(response.content) ===
    JSON.stringify({ 'application/json': { schema: { $ref: '#/components/schemas/Error' } } }) &&
  Object.keys(response.headers ?? {}).every((name) => name === 'Idempotent-Replayed');

/**
 * Every documented operation is rate-limited, so each of its answers carries `X-Request-Id` and
 * `RateLimit-*`, and a 429 or a 503 `Retry-After`: the headers are declared once (`components.headers`)
 * and referred to. The error answers, most of the document's responses, are declared once per
 * status (`components.responses.Error<status>`, and `Error<status>Replayable` where the answer
 * may be a replay under an Idempotency-Key) and referred to, which keeps the document small.
 */
function withResponseHeaders<T extends { paths?: unknown }>(document: T): T {
  const errors: Record<string, unknown> = {};
  const headersOf = (status: string, headers: Record<string, unknown> = {}) => ({
    'X-Request-Id': headerRef('X-Request-Id'),
    'RateLimit-Limit': headerRef('RateLimit-Limit'),
    'RateLimit-Remaining': headerRef('RateLimit-Remaining'),
    'RateLimit-Reset': headerRef('RateLimit-Reset'),
    ...(status === '429' || status === '503' ? { 'Retry-After': headerRef('Retry-After') } : {}),
    ...headers,
  });
  const sharedError = (status: string, response: DocumentedResponse) => {
    const name = `Error${status}${response.headers?.['Idempotent-Replayed'] ? 'Replayable' : ''}`;
    const codes = Object.entries(ERROR_CATALOGUE).flatMap(([code, e]) => (String(e.status) === status ? [code] : []));
    errors[name] ??= {
      description: `The error body; \`code\` is ${codes.length > 1 ? 'one of ' : ''}${codes.map((code) => `\`${code}\``).join(', ')} (see /docs/errors).`,
      headers: headersOf(status, response.headers),
      content: response.content,
    };
    return { $ref: `#/components/responses/${name}` };
  };
  for (const [, operation] of operationsOf(document)) {
    const responses = (operation.responses ?? {}) as Record<string, DocumentedResponse | { $ref: string }>;
    for (const [status, response] of Object.entries(responses) as [string, DocumentedResponse][]) {
      if (Number(status) >= 400 && isPlainError(response)) responses[status] = sharedError(status, response);
      else response.headers = headersOf(status, response.headers);
    }
  }
  const withComponents = document as { components?: Record<string, Record<string, unknown>> };
  withComponents.components ??= {};
  const components = withComponents.components;
  components.headers = { ...components.headers, ...RESPONSE_HEADERS };
  components.responses = { ...components.responses, ...errors };
  return document;
}

/**
 * A parameter with a default is optional to the client (the default fills it in before the
 * handler runs), whatever the schema's `required` list says for the handler's sake.
 */
function optionalDefaults<T extends { paths?: unknown }>(document: T): T {
  for (const item of Object.values((document.paths ?? {}) as Record<string, Record<string, unknown>>)) {
    for (const operation of Object.values(item ?? {})) {
      const parameters = (operation as { parameters?: { required?: boolean; schema?: { default?: unknown } }[] })
        ?.parameters;
      for (const parameter of parameters ?? []) {
        if (parameter.schema?.default !== undefined) parameter.required = false;
      }
    }
  }
  return document;
}

/**
 * The document, the reference and the error catalogue, in a scope of their own that compresses
 * its answers (gzip or brotli, from 1 KB): the reference's script and the document are megabytes a
 * browser waits for. The API's answers are not compressed: a small list would cost about as much
 * CPU to compress as to answer (docs: "Where the reference is").
 */
export async function registerDocsRoutes(app: FastifyInstance): Promise<void> {
  await app.register(async (docs) => {
    await docs.register(compress, {
      encodings: ['br', 'gzip'],
      threshold: 1024,
    });
    docs.get('/api/v1/openapi.json', { schema: { hide: true }, config: { rateLimit: false } }, async () =>
      app.swagger(),
    );
    await docs.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: { deepLinking: true },
      theme: { title: 'Workspace API reference' },
    });
    const errorPage = errorCataloguePage();
    docs.get('/docs/errors', { schema: { hide: true }, config: { rateLimit: false } }, async (_request, reply) => {
      reply.type('text/html; charset=utf-8');
      return errorPage;
    });
  });
}
