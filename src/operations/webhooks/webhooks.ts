// Webhooks (scope `webhooks`; DESIGN.md §7): endpoints with their signing secret,
// secret rotation, the delivery log and replays. The event types and their payloads are in
// src/domain/webhooks/event-types.ts and in the OpenAPI document's `webhooks` section.
import { Type } from '@sinclair/typebox';
import { Deleted, ListOf, ListQuery, Nullable, Uuid } from '../../domain/shapes.js';
import {
  DeliveryStatus,
  MAX_URL_LENGTH,
  WebhookDeliveryRecord,
  WebhookEndpointRecord,
  WebhookEndpointWithSecret,
} from '../../domain/webhooks/endpoints.js';
import { EVENT_TYPE_NAMES } from '../../domain/webhooks/event-types.js';
import { defineOperation } from '../registry.js';

const EventNames = Type.Array(
  Type.String({
    minLength: 1,
    maxLength: 100,
    description: `An event type (${EVENT_TYPE_NAMES.map((t) => `\`${t}\``).join(', ')}) or \`*\` for all.`,
  }),
  { minItems: 1, maxItems: 50 },
);

const Url = Type.String({
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description: 'An http(s) URL on a public address (private, loopback and link-local addresses are refused).',
});

const Description = Type.String({ maxLength: 500 });

const EndpointParams = Type.Object({ endpoint_id: Uuid });
const DeliveryParams = Type.Object({ delivery_id: Uuid });

export const webhookOperations = [
  defineOperation({
    id: 'createWebhookEndpoint',
    method: 'POST',
    path: '/api/v1/webhook-endpoints',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Create a webhook endpoint',
    description:
      'Registers a URL to receive the events named in `events` (or `*` for all), signed per Standard Webhooks. ' +
      'The answer carries the signing `secret`, shown this once. The URL must be http(s) on a public address.',
    body: Type.Object(
      { url: Url, events: EventNames, description: Type.Optional(Description) },
      { additionalProperties: false },
    ),
    response: WebhookEndpointWithSecret,
    status: 201,
    secretAnswer: true,
    handler: ({ tenantId, body, services }) => services.webhooks.createEndpoint(tenantId, body),
  }),
  defineOperation({
    id: 'listWebhookEndpoints',
    method: 'GET',
    path: '/api/v1/webhook-endpoints',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'List webhook endpoints',
    description: 'Lists the webhook endpoints of the workspace, newest first. Secrets are never listed.',
    query: ListQuery,
    response: ListOf(WebhookEndpointRecord),
    handler: ({ tenantId, query, services }) => services.webhooks.listEndpoints(tenantId, query),
  }),
  defineOperation({
    id: 'getWebhookEndpoint',
    method: 'GET',
    path: '/api/v1/webhook-endpoints/:endpoint_id',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'Get a webhook endpoint',
    description: 'Returns one webhook endpoint, with `disabled_reason` when it was disabled.',
    params: EndpointParams,
    response: WebhookEndpointRecord,
    handler: ({ tenantId, params, services }) => services.webhooks.getEndpoint(tenantId, params.endpoint_id),
  }),
  defineOperation({
    id: 'updateWebhookEndpoint',
    method: 'PATCH',
    path: '/api/v1/webhook-endpoints/:endpoint_id',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Update a webhook endpoint',
    description:
      'Changes the fields sent: `url`, `events`, `enabled`, `description`. Setting `enabled: true` re-enables an ' +
      'endpoint disabled after failing, clearing `disabled_reason`.',
    params: EndpointParams,
    body: Type.Object(
      {
        url: Type.Optional(Url),
        events: Type.Optional(EventNames),
        enabled: Type.Optional(Type.Boolean()),
        description: Type.Optional(Nullable(Description)),
      },
      { additionalProperties: false },
    ),
    response: WebhookEndpointRecord,
    idempotent: true,
    handler: ({ tenantId, params, body, services }) =>
      services.webhooks.updateEndpoint(tenantId, params.endpoint_id, body),
  }),
  defineOperation({
    id: 'deleteWebhookEndpoint',
    method: 'DELETE',
    path: '/api/v1/webhook-endpoints/:endpoint_id',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Delete a webhook endpoint',
    description: 'Deletes the endpoint and its delivery log; attempts still due are dropped. This cannot be undone.',
    params: EndpointParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.webhooks.deleteEndpoint(tenantId, params.endpoint_id),
  }),
  defineOperation({
    id: 'rotateWebhookSecret',
    method: 'POST',
    writes: 'update',
    path: '/api/v1/webhook-endpoints/:endpoint_id/rotate-secret',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Rotate the signing secret of a webhook endpoint',
    description:
      'Issues a new signing secret, shown in this answer only. For 24 hours the old secret keeps signing beside ' +
      'the new one: `webhook-signature` then carries two signatures, so receivers can switch without losing events.',
    params: EndpointParams,
    response: WebhookEndpointWithSecret,
    secretAnswer: true,
    handler: ({ tenantId, params, services }) => services.webhooks.rotateSecret(tenantId, params.endpoint_id),
  }),
  defineOperation({
    id: 'listWebhookDeliveries',
    method: 'GET',
    path: '/api/v1/webhook-endpoints/:endpoint_id/deliveries',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'List the deliveries of a webhook endpoint',
    description:
      'The delivery log of an endpoint, newest first: each event sent to it with its status, attempts, last ' +
      'response code or error, and next retry. `status` filters.',
    params: EndpointParams,
    query: Type.Object(
      { ...ListQuery.properties, status: Type.Optional(DeliveryStatus) },
      { additionalProperties: false },
    ),
    response: ListOf(WebhookDeliveryRecord),
    handler: ({ tenantId, params, query, services }) =>
      services.webhooks.listDeliveries(tenantId, params.endpoint_id, query),
  }),
  defineOperation({
    id: 'getWebhookDelivery',
    method: 'GET',
    path: '/api/v1/webhook-deliveries/:delivery_id',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'Get a webhook delivery',
    description: 'Returns one delivery of the log: status, attempts, last response code or error, next retry.',
    params: DeliveryParams,
    response: WebhookDeliveryRecord,
    handler: ({ tenantId, params, services }) => services.webhooks.getDelivery(tenantId, params.delivery_id),
  }),
  defineOperation({
    id: 'replayWebhookDelivery',
    method: 'POST',
    path: '/api/v1/webhook-deliveries/:delivery_id/replay',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Replay a webhook delivery',
    description:
      'Sends the delivery again as soon as a worker is free: the same event and body with the same `webhook-id`, ' +
      'freshly signed; if it fails it is retried for 24 hours. Answers 202 with the delivery, status `pending`. ' +
      'A disabled endpoint must be enabled first (409).',
    params: DeliveryParams,
    response: WebhookDeliveryRecord,
    status: 202,
    errors: ['conflict'],
    handler: ({ tenantId, params, services }) => services.webhooks.replayDelivery(tenantId, params.delivery_id),
  }),
];
