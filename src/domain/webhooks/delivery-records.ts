// A delivery of the log as the API shows it: its status, attempts, last answer and next retry.
import type { WebhookDeliveryStatus } from '../../db/schema.js';
import { iso } from '../../lib/time.js';

export interface WebhookDeliveryRecord {
  id: string;
  object: 'webhook_delivery';
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  next_retry_at: string | null;
  delivered_at: string | null;
  created_at: string;
  updated_at: string;
}

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
