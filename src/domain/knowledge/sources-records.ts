// The records of knowledge sources, as the API answers them (the response schemas and their
// types), and the rows they are made from.
import { type Static, Type } from '@sinclair/typebox';
import { iso } from '../../lib/time.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

export const SOURCE_TYPES = ['website', 'manual'] as const;
export const SourceType = Type.Union([Type.Literal('website'), Type.Literal('manual')], {
  description: '`website`: crawled from `domain`. `manual`: holds documents created through the API.',
});
export type SourceType = Static<typeof SourceType>;

export const SYNC_STATUSES = ['never_synced', 'pending', 'syncing', 'synced', 'failed'] as const;
export const SyncStatus = Type.Union(
  SYNC_STATUSES.map((s) => Type.Literal(s)),
  { description: '`never_synced` → `pending` (queued) → `syncing` → `synced` or `failed`.' },
);
export type SyncStatus = Static<typeof SyncStatus>;

export const SourceRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('source'),
    name: Type.String(),
    source_type: SourceType,
    source_id: Nullable(Type.String({ description: 'Your own identifier for the source; `id` is ours.' })),
    domain: Nullable(Type.String({ description: 'The site a website source crawls.' })),
    additional_info: Type.Record(Type.String(), Type.Unknown()),
    sync_status: SyncStatus,
    sync_error: Nullable(Type.String({ description: 'Why the last sync failed; null otherwise.' })),
    auto_sync_enabled: Type.Boolean(),
    last_synced_at: Nullable(Timestamp),
    document_count: Type.Integer(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Source' },
);
export type SourceRecord = Static<typeof SourceRecord>;

export const SyncAcknowledgement = Type.Object(
  {
    object: Type.Literal('sync'),
    status: SyncStatus,
    source_id: Uuid,
  },
  { title: 'SyncAcknowledgement' },
);
export type SyncAcknowledgement = Static<typeof SyncAcknowledgement>;

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
