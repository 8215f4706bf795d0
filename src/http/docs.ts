// The service documents itself: the OpenAPI 3.1.0 document at /api/v1/openapi.json, an
// interactive reference at /docs, and the error reference at /docs/errors that every error's
// `doc_url` points into.
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { openApiWebhooks } from '../domain/webhooks/event-types.js';
import type { Operation } from '../operations/registry.js';
import { ERROR_CATALOGUE } from './errors.js';
import { NOT_STORED_STATUSES } from './idempotency.js';

export const API_VERSION = '1.0.0';

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
        description:
          'The public, multi-tenant HTTP API of the workspace of an AI support-agent platform. ' +
          'Authenticate with an API key in `X-API-Key`; keys carry `<resource>:read` / `<resource>:write` scopes. ' +
          'Errors: see /docs/errors.',
      },
      // OpenAPI 3.1 `webhooks`: every event type we send, with its payload (issue 12).
      webhooks: openApiWebhooks(),
      components: {
        securitySchemes: {
          ScopedAPIKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          OperatorToken: { type: 'http', scheme: 'bearer' },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    transformObject: (documents) =>
      'openapiObject' in documents
        ? withResponseHeaders(withIdempotency(optionalDefaults(withEventStreams(documents.openapiObject, operations))))
        : documents.swaggerObject,
  });
}

/**
 * Where the paths are served (README: Tenancy): `{base_url}`, a tenant's own host, first, as the
 * spec has it; then PUBLIC_URL when this deployment knows its public origin; then the host this
 * document was read from (a relative URL), on which the interactive reference tries requests.
 */
function servers({ baseDomain, publicUrl }: Pick<Config, 'baseDomain' | 'publicUrl'>) {
  const anyHost =
    "On a host that names no tenant (BASE_DOMAIN itself, localhost, an IP address) the key's tenant is used.";
  return [
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
    { url: '/', description: `The host serving this document. ${anyHost}` },
  ];
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

/** The response headers the server sends (README: Rate limits, Request ids, Idempotency), declared once. */
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

export async function registerDocsRoutes(app: FastifyInstance): Promise<void> {
  app.get('/api/v1/openapi.json', { schema: { hide: true }, config: { rateLimit: false } }, async () => app.swagger());

  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: true } });

  app.get('/docs/errors', { schema: { hide: true }, config: { rateLimit: false } }, async (_request, reply) => {
    const rows = Object.entries(ERROR_CATALOGUE)
      .map(
        ([code, e]) =>
          `<tr id="${code}"><td><a href="#${code}"><code>${code}</code></a></td><td>${e.status}</td>` +
          `<td><code>${e.type}</code></td><td>${escapeHtml(e.condition)}</td></tr>`,
      )
      .join('\n');
    reply.type('text/html; charset=utf-8');
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Workspace API — errors</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1f2328}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d0d7de;padding:.5rem;text-align:left;vertical-align:top}
tr:target{background:#fff8c5}code{font-size:90%}</style></head>
<body><h1>Errors</h1>
<p>Every error answers <code>{"error": {type, code, message, param, doc_url, event_id}}</code>.
<code>param</code> names the parameter at fault as a path (<code>files[3].path</code>);
<code>event_id</code> comes with <code>internal_error</code> and names the server log entry.</p>
<table><thead><tr><th>code</th><th>status</th><th>type</th><th>when</th></tr></thead><tbody>
${rows}
</tbody></table></body></html>`;
  });
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] ?? c);
}
