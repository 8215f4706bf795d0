// The records of documents and their translations, as the API answers them (the response schemas
// and their types), the rows they are made from, and the bounds a document's text keeps within.
import { createHash } from 'node:crypto';
import { type Static, Type } from '@sinclair/typebox';
import { iso } from '../../lib/time.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

export const DocumentRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('document'),
    title: Type.String(),
    content: Type.String(),
    language: Type.String(),
    source_id: Nullable(Uuid),
    page_id: Nullable(Type.String({ description: 'For a website page: its URL path.' })),
    url: Nullable(Type.String({ description: 'For a website page: the URL it was read from.' })),
    created_at: Timestamp,
    updated_at: Timestamp,
    // With `q`: the document's rank (see search.ts) and an excerpt around the match.
    rank: Type.Optional(Type.Number({ description: 'With `q`: relevance in (0, 1), higher is better.' })),
    snippet: Type.Optional(Type.String({ description: 'With `q`: an excerpt around the matched words.' })),
  },
  { title: 'Document' },
);
export type DocumentRecord = Static<typeof DocumentRecord>;

export const TranslationRecord = Type.Object(
  {
    id: Uuid,
    language: Type.String(),
    title: Type.String(),
    content: Type.String(),
    object: Type.Literal('translation'),
    related_questions: Type.String(),
    document_id: Uuid,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Translation' },
);
export type TranslationRecord = Static<typeof TranslationRecord>;

export interface DocumentInput {
  title: string;
  content: string;
  language?: string | undefined;
  source_id?: string | undefined;
  page_id?: string | undefined;
  url?: string | undefined;
}

export interface TranslationInput {
  language: string;
  title: string;
  content: string;
  related_questions?: string | undefined;
}

export interface BulkDeleteInput {
  document_ids?: string[] | undefined;
  source_id?: string | undefined;
  page_ids?: string[] | undefined;
}

/** A page as a connector found it. */
export interface PageInput {
  page_id: string;
  url: string;
  title: string;
  content: string;
  language: string;
}

export interface PageSyncResult {
  added: number;
  updated: number;
  unchanged: number;
  removed: number;
}

/** The longest document body, in characters. */
export const MAX_CONTENT_LENGTH = 1_000_000;
/**
 * The longest page_id, in characters and in UTF-8 bytes: a unique index holds it, and an index
 * entry has room for about 2,700 bytes. A crawl leaves out pages whose path is longer.
 */
export const MAX_PAGE_ID_LENGTH = 2000;
/** Search reads a body's first characters only (migration 0011): what lies past them is not found. */
export const INDEXED_CONTENT_LENGTH = 100_000;

export const DOCUMENT_COLUMNS = [
  'id',
  'title',
  'content',
  'language',
  'source_id',
  'page_id',
  'url',
  'created_at',
  'updated_at',
] as const;

export type DocumentRow = {
  id: string;
  title: string;
  content: string;
  language: string;
  source_id: string | null;
  page_id: string | null;
  url: string | null;
  created_at: Date;
  updated_at: Date;
  rank?: number;
  snippet?: string;
};

export const toDocumentRecord = (row: DocumentRow): DocumentRecord => ({
  id: row.id,
  object: 'document',
  title: row.title,
  content: row.content,
  language: row.language,
  source_id: row.source_id,
  page_id: row.page_id,
  url: row.url,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
  ...(row.rank !== undefined ? { rank: Math.round(Number(row.rank) * 1e6) / 1e6 } : {}),
  ...(row.snippet !== undefined ? { snippet: row.snippet } : {}),
});

export const TRANSLATION_COLUMNS = [
  'id',
  'document_id',
  'language',
  'title',
  'content',
  'related_questions',
  'created_at',
  'updated_at',
] as const;

export type TranslationRow = {
  id: string;
  document_id: string;
  language: string;
  title: string;
  content: string;
  related_questions: string;
  created_at: Date;
  updated_at: Date;
};

export const toTranslationRecord = (row: TranslationRow): TranslationRecord => ({
  id: row.id,
  object: 'translation',
  document_id: row.document_id,
  language: row.language,
  title: row.title,
  content: row.content,
  related_questions: row.related_questions,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export const contentHash = (title: string, content: string) =>
  createHash('sha256').update(title).update('\u0000').update(content).digest('hex');
