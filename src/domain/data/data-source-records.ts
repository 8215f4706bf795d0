// The records of custom data sources and their rows, as the API answers them (the response schemas
// and their types), and the stored rows they are made from.
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { DataFieldDeclaration } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import type { Page } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

/** Row `data` may nest objects and arrays this many levels deep (the object itself is level 1). */
export const MAX_DATA_DEPTH = 32;
/** Fastify's router refuses path parameters longer than this (UTF-16 units, decoded). */
export const MAX_EXTERNAL_ID_LENGTH = 100;
/** Tags a row may carry, a smart source's own among them. */
export const MAX_ROW_TAGS = 100;
/** A slug: lowercase letters, digits, `_`, `-`; starts with a letter or digit; ≤ 63 characters. */
export const SLUG_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';

export type FieldType = DataFieldDeclaration['type'];

/** A declared field of row `data`: its key, its type, and whether rows must carry it. */
export const FieldDeclaration = Type.Object(
  {
    name: Type.String({
      pattern: '^[A-Za-z_][A-Za-z0-9_]{0,62}$',
      description: 'The key in row `data`: a letter or `_`, then letters, digits or `_`.',
    }),
    type: Type.Union(
      [
        Type.Literal('string'),
        Type.Literal('number'),
        Type.Literal('boolean'),
        Type.Literal('date'),
        Type.Literal('json'),
      ],
      { description: '`date` is an ISO 8601 date or date-time string; `json` is any value.' },
    ),
    required: Type.Optional(Type.Boolean({ description: 'Rows must carry a non-null value. Default false.' })),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  { additionalProperties: false },
);

export const DataSourceRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('custom_data_source'),
    name: Type.String(),
    slug: Type.String(),
    fields: Type.Array(FieldDeclaration, { description: 'Declared fields row `data` is checked against.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'CustomDataSource' },
);
export type DataSourceRecord = Static<typeof DataSourceRecord>;

/** Any JSON object; checked for depth and declared fields by the domain. */
export const RowData = Type.Unsafe<Record<string, unknown>>({
  type: 'object',
  additionalProperties: true,
  description: `Any JSON object (at most ${MAX_DATA_DEPTH} levels deep), checked against the source's declared fields.`,
});

/** The spec's custom data source row, exactly; `score` is null unless a query ranked the row. */
export const RowRecord = Type.Object(
  {
    id: Uuid,
    external_id: Type.String(),
    data: RowData,
    tags: Type.Array(Type.String()),
    searchable_text: Type.String(),
    content: Type.String(),
    updated_at: Timestamp,
    score: Nullable(
      Type.Number({ description: 'Full-text rank for `q` (higher is better); null when no query ranked the row.' }),
    ),
  },
  { title: 'CustomDataSourceRow' },
);
export type RowRecord = Static<typeof RowRecord>;

export interface RowInput {
  data: Record<string, unknown>;
  tags?: string[] | undefined;
  searchable_text?: string | undefined;
  content?: string | undefined;
}

export interface BatchRowInput extends RowInput {
  external_id: string;
}

export const RowsUpserted = Type.Object(
  {
    object: Type.Literal('rows_upserted'),
    created_count: Type.Integer(),
    updated_count: Type.Integer(),
    data: Type.Array(RowRecord, { description: 'The written rows, in request order.' }),
  },
  { title: 'RowsUpserted' },
);
export type RowsUpserted = Static<typeof RowsUpserted>;

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
