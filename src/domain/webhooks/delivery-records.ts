// A delivery of the log as the API shows it, the response schema the operations declare with the
// record type derived from it: its status, attempts, last answer and next retry.
import { type Static, Type } from '@sinclair/typebox';
import type { WebhookDeliveryStatus } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

export const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')], {
  description: '`pending`: not yet delivered, an attempt is due; `succeeded`: a 2xx came back; `failed`: given up.',
});

export const WebhookDeliveryRecord = Type.Object(
  {
    id: Type.String({
      format: 'uuid',
      description: 'The delivery id, sent as `webhook-id`: the same on every retry and replay.',
    }),
    object: Type.Literal('webhook_delivery'),
    endpoint_id: Uuid,
    event_id: Uuid,
    event_type: Type.String(),
    status: DeliveryStatus,
    attempts: Type.Integer({ description: 'Attempts made so far.' }),
    last_status_code: Nullable(Type.Integer({ description: 'HTTP status of the last answer; null without one.' })),
    last_error: Nullable(Type.String()),
    last_attempt_at: Nullable(Timestamp),
    next_retry_at: Nullable(
      Type.String({ format: 'date-time', description: 'When the next attempt is due, while pending.' }),
    ),
    delivered_at: Nullable(Timestamp),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'WebhookDelivery' },
);
export type WebhookDeliveryRecord = Static<typeof WebhookDeliveryRecord>;

export const DELIVERY_COLUMNS = [
  'id',
  'endpoint_id',
  'event_id',
  'event_type',
  'status',
  'attempts',
  'last_status_code',
  'last_error',
  'last_attempt_at',
  'next_retry_at',
  'delivered_at',
  'created_at',
  'updated_at',
] as const;

type DeliveryRow = {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: Date | null;
  next_retry_at: Date | null;
  delivered_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

export const toDeliveryRecord = (row: DeliveryRow): WebhookDeliveryRecord => ({
  id: row.id,
  object: 'webhook_delivery',
  endpoint_id: row.endpoint_id,
  event_id: row.event_id,
  event_type: row.event_type,
  status: row.status,
  attempts: Number(row.attempts),
  last_status_code: row.last_status_code,
  last_error: row.last_error,
  last_attempt_at: iso(row.last_attempt_at),
  next_retry_at: iso(row.next_retry_at),
  delivered_at: iso(row.delivered_at),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});
