// An endpoint as the API shows it, the response schema the operations declare with the record
// type derived from it: never its secrets, and the end of a rotation's overlap only while it lasts.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { isUuid } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

export const WebhookEndpointRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('webhook_endpoint'),
    url: Type.String(),
    description: Nullable(Type.String()),
    events: Type.Array(Type.String()),
    enabled: Type.Boolean(),
    disabled_reason: Nullable(Type.String({ description: 'Why the endpoint was disabled, when it is.' })),
    previous_secret_expires_at: Nullable(
      Type.String({
        format: 'date-time',
        description: 'After a rotation: until when the previous secret still signs beside the new one.',
      }),
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'WebhookEndpoint' },
);
export type WebhookEndpointRecord = Static<typeof WebhookEndpointRecord>;

/** The answer to create and rotate-secret: the endpoint with its new signing secret, shown this once. */
export const WebhookEndpointWithSecret = Type.Object(
  {
    ...WebhookEndpointRecord.properties,
    secret: Type.String({
      description: 'The signing secret, `whsec_` + base64. Shown in this answer only: store it now.',
    }),
  },
  { title: 'WebhookEndpointWithSecret' },
);
export type WebhookEndpointWithSecret = Static<typeof WebhookEndpointWithSecret>;

export const ENDPOINT_COLUMNS = [
  'id',
  'url',
  'description',
  'events',
  'enabled',
  'disabled_reason',
  'previous_secret_expires_at',
  'created_at',
  'updated_at',
] as const;

export type EndpointRow = {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

export const toEndpointRecord = (row: EndpointRow, now: () => Date): WebhookEndpointRecord => {
  const overlap = row.previous_secret_expires_at;
  return {
    id: row.id,
    object: 'webhook_endpoint',
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    previous_secret_expires_at: overlap && overlap > now() ? iso(overlap) : null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
};

/** The tenant's endpoint, or 404. */
export async function loadEndpoint(executor: Db, tenantId: string, id: string): Promise<EndpointRow> {
  if (!isUuid(id)) throw new NotFoundError('webhook endpoint', id);
  const row = await executor
    .selectFrom('webhook_endpoints')
    .select(ENDPOINT_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('webhook endpoint', id);
  return row;
}
