// An endpoint as the API shows it: never its secrets, and the end of a rotation's overlap only
// while it lasts.
import type { Db } from '../../db/client.js';
import { isUuid } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';

export interface WebhookEndpointRecord {
  id: string;
  object: 'webhook_endpoint';
  url: string;
  description: string | null;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  /** Until when the previous secret still signs, after a rotation. */
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

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
