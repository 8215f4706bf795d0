// The records of knowledge sources, as the API answers them, and the rows they are made from.
import { iso } from '../../lib/time.js';

export const SOURCE_TYPES = ['website', 'manual'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const SYNC_STATUSES = ['never_synced', 'pending', 'syncing', 'synced', 'failed'] as const;
export type SyncStatus = (typeof SYNC_STATUSES)[number];

export interface SourceRecord {
  id: string;
  object: 'source';
  name: string;
  source_type: SourceType;
  /** Your own identifier for the source (spec field `source_id`); `id` is ours. */
  source_id: string | null;
  domain: string | null;
  additional_info: Record<string, unknown>;
  sync_status: SyncStatus;
  sync_error: string | null;
  auto_sync_enabled: boolean;
  last_synced_at: string | null;
  document_count: number;
  created_at: string;
  updated_at: string;
}

export interface SyncAcknowledgement {
  object: 'sync';
  status: SyncStatus;
  source_id: string;
}

export interface CreateSourceInput {
  name: string;
  source_type: SourceType;
  domain?: string | undefined;
  source_id?: string | undefined;
  additional_info?: Record<string, unknown> | undefined;
  auto_sync_enabled?: boolean | undefined;
}

export type UpdateSourceInput = Partial<Omit<CreateSourceInput, 'source_type'>>;

export type SourceRow = {
  id: string;
  name: string;
  source_type: SourceType;
  external_id: string | null;
  domain: string | null;
  additional_info: Record<string, unknown>;
  sync_status: string;
  sync_error: string | null;
  auto_sync_enabled: boolean;
  last_synced_at: Date | null;
  created_at: Date;
  updated_at: Date;
  document_count: number;
};

export const SOURCE_COLUMNS = [
  'id',
  'name',
  'source_type',
  'external_id',
  'domain',
  'additional_info',
  'sync_status',
  'sync_error',
  'auto_sync_enabled',
  'last_synced_at',
  'created_at',
  'updated_at',
] as const;

export const toSourceRecord = (row: SourceRow): SourceRecord => ({
  id: row.id,
  object: 'source',
  name: row.name,
  source_type: row.source_type,
  source_id: row.external_id,
  domain: row.domain,
  additional_info: row.additional_info ?? {},
  sync_status: row.sync_status as SyncStatus,
  sync_error: row.sync_error,
  auto_sync_enabled: row.auto_sync_enabled,
  last_synced_at: iso(row.last_synced_at),
  document_count: Number(row.document_count ?? 0),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});
