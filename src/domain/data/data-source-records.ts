// The records of custom data sources and their rows, as the API answers them, and the stored rows
// they are made from.
import { sql } from 'kysely';
import type { DataFieldDeclaration } from '../../db/schema.js';
import { iso } from '../../lib/time.js';
import type { Page } from '../pagination.js';

/** Row `data` may nest objects and arrays this many levels deep (the object itself is level 1). */
export const MAX_DATA_DEPTH = 32;
/** Fastify's router refuses path parameters longer than this (UTF-16 units, decoded). */
export const MAX_EXTERNAL_ID_LENGTH = 100;
/** Tags a row may carry, a smart source's own among them. */
export const MAX_ROW_TAGS = 100;
/** A slug: lowercase letters, digits, `_`, `-`; starts with a letter or digit; ≤ 63 characters. */
export const SLUG_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';

export type FieldType = DataFieldDeclaration['type'];

export interface DataSourceRecord {
  id: string;
  object: 'custom_data_source';
  name: string;
  slug: string;
  fields: DataFieldDeclaration[];
  created_at: string;
  updated_at: string;
}

/** The spec's custom data source row, exactly; `score` is null unless a query ranked the row. */
export interface RowRecord {
  id: string;
  external_id: string;
  data: Record<string, unknown>;
  tags: string[];
  searchable_text: string;
  content: string;
  updated_at: string;
  score: number | null;
}

export interface RowInput {
  data: Record<string, unknown>;
  tags?: string[] | undefined;
  searchable_text?: string | undefined;
  content?: string | undefined;
}

export interface BatchRowInput extends RowInput {
  external_id: string;
}

export interface RowsUpserted {
  object: 'rows_upserted';
  created_count: number;
  updated_count: number;
  data: RowRecord[];
}

export interface RowQuery extends Page {
  q?: string | undefined;
  tag?: string | undefined;
}

export interface NewDataSource {
  name: string;
  slug: string;
  fields?: DataFieldDeclaration[] | undefined;
}

/** A source's metadata row. */
export interface SourceRow {
  id: string;
  name: string;
  slug: string;
  fields: DataFieldDeclaration[];
  table_name: string;
  created_at: Date;
  updated_at: Date;
}

export const SOURCE_COLUMNS = ['id', 'name', 'slug', 'fields', 'table_name', 'created_at', 'updated_at'] as const;

/** A row of a backing table. */
export interface StoredRow {
  id: string;
  external_id: string;
  data: Record<string, unknown>;
  tags: string[];
  searchable_text: string;
  content: string;
  updated_at: Date;
  score: number | null;
}

export const ROW_COLUMNS = sql`id, external_id, data, tags, searchable_text, content, updated_at`;

export const toSourceRecord = (row: SourceRow): DataSourceRecord => ({
  id: row.id,
  object: 'custom_data_source',
  name: row.name,
  slug: row.slug,
  fields: row.fields,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export const toRowRecord = (row: StoredRow): RowRecord => ({
  id: row.id,
  external_id: row.external_id,
  data: row.data,
  tags: row.tags,
  searchable_text: row.searchable_text,
  content: row.content,
  updated_at: iso(row.updated_at),
  score: row.score === null || row.score === undefined ? null : Number(row.score),
});
