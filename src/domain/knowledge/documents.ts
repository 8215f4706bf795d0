// Documents and their translations: the tenant's knowledge, searched with PostgreSQL full-text
// search (src/domain/knowledge/search.ts). A document either stands alone, belongs to a `manual`
// source (created through the API), or is a page of a `website` source (written by its sync,
// `page_id` = the page's URL path). Translations: one per language (DESIGN.md §7).
import { createHash } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/client.js';
import { isForeignKeyViolation, isUniqueViolation } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import { newId } from '../../lib/ids.js';
import { characterCount } from '../../lib/text.js';
import { iso } from '../../lib/time.js';
import {
  ConflictError,
  checkBulkItems,
  DomainError,
  InvalidParametersError,
  MissingParameterError,
  NotFoundError,
  ValidationError,
} from '../errors.js';
import { decodeRankCursor, type List, newestFirst, type Page, rankCursor, toList } from '../pagination.js';
import type { PassagesWritten } from './embeddings/index.js';
import { documentRanks } from './search.js';
import {
  DEFAULT_LANGUAGE,
  normalizeLanguage,
  type SearchRunner,
  searchConfigFor,
  searchConfigSql,
  searchQuery,
} from './text-search.js';

type Executor = Db | Transaction<Database>;

export interface DocumentRecord {
  id: string;
  object: 'document';
  title: string;
  content: string;
  language: string;
  source_id: string | null;
  page_id: string | null;
  url: string | null;
  created_at: string;
  updated_at: string;
  /** With `q`: the document's rank (see knowledge-search.ts) and an excerpt around the match. */
  rank?: number;
  snippet?: string;
}

export interface TranslationRecord {
  id: string;
  object: 'translation';
  document_id: string;
  language: string;
  title: string;
  content: string;
  related_questions: string;
  created_at: string;
  updated_at: string;
}

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

const DOCUMENT_COLUMNS = [
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

type DocumentRow = {
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

const toDocumentRecord = (row: DocumentRow): DocumentRecord => ({
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

const TRANSLATION_COLUMNS = [
  'id',
  'document_id',
  'language',
  'title',
  'content',
  'related_questions',
  'created_at',
  'updated_at',
] as const;

type TranslationRow = {
  id: string;
  document_id: string;
  language: string;
  title: string;
  content: string;
  related_questions: string;
  created_at: Date;
  updated_at: Date;
};

const toTranslationRecord = (row: TranslationRow): TranslationRecord => ({
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

const contentHash = (title: string, content: string) =>
  createHash('sha256').update(title).update('\u0000').update(content).digest('hex');

const HEADLINE_OPTIONS =
  'StartSel="",StopSel="",MaxWords=40,MinWords=15,ShortWord=2,MaxFragments=2,FragmentDelimiter=" … "';

export function createDocumentService({
  db,
  search,
  passagesWritten,
}: {
  db: Db;
  search: SearchRunner;
  /** Told, in the writing transaction, of documents whose passages changed (to embed them). */
  passagesWritten?: PassagesWritten | undefined;
}) {
  const written = (executor: Executor, tenantId: string, documentIds: string[]) =>
    passagesWritten && documentIds.length > 0 ? passagesWritten(executor, tenantId, documentIds) : Promise.resolve();
  /** `write` in a transaction when something must be told of it in the same one. */
  const writing = <T>(write: (executor: Executor) => Promise<T>): Promise<T> =>
    passagesWritten ? db.transaction().execute(write) : write(db);

  /** A body `source_id` must name a manual source of the tenant: website pages come from their crawl. */
  async function checkManualSource(executor: Executor, tenantId: string, sourceId: string): Promise<void> {
    const source = await executor
      .selectFrom('sources')
      .select('source_type')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', sourceId)
      .executeTakeFirst();
    if (!source) throw new InvalidParametersError('source_id', `No such source: '${sourceId}'.`);
    if (source.source_type !== 'manual') {
      throw new InvalidParametersError(
        'source_id',
        'Documents of a website source come from its sync; add documents to a manual source.',
      );
    }
  }

  async function insertDocument(executor: Executor, tenantId: string, input: DocumentInput): Promise<DocumentRecord> {
    const language = normalizeLanguage(input.language ?? DEFAULT_LANGUAGE);
    try {
      const row = await executor
        .insertInto('documents')
        .values({
          id: newId(),
          tenant_id: tenantId,
          source_id: input.source_id ?? null,
          page_id: input.page_id ?? null,
          url: input.url ?? null,
          title: input.title,
          content: input.content,
          language,
          search_config: searchConfigFor(language),
          content_hash: contentHash(input.title, input.content),
        })
        .returning(DOCUMENT_COLUMNS)
        .executeTakeFirstOrThrow();
      await written(executor, tenantId, [row.id]);
      return toDocumentRecord(row);
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new ConflictError(`The source already has a document with page_id '${input.page_id}'.`, 'page_id');
      }
      throw error;
    }
  }

  async function documentExists(executor: Executor, tenantId: string, id: string): Promise<boolean> {
    const row = await executor
      .selectFrom('documents')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  return {
    insertDocument,

    async create(tenantId: string, input: DocumentInput): Promise<DocumentRecord> {
      if (input.page_id !== undefined && input.source_id === undefined) {
        throw new MissingParameterError('source_id', 'page_id names a page of a source: send source_id with it.');
      }
      if (input.page_id !== undefined && Buffer.byteLength(input.page_id) > MAX_PAGE_ID_LENGTH) {
        throw new ValidationError('page_id', `page_id must not pass ${MAX_PAGE_ID_LENGTH} bytes in UTF-8.`);
      }
      if (input.source_id !== undefined) await checkManualSource(db, tenantId, input.source_id);
      return writing((executor) => insertDocument(executor, tenantId, input));
    },

    async list(
      tenantId: string,
      page: Page & { source_id?: string | undefined; q?: string | undefined },
    ): Promise<List<DocumentRecord>> {
      const q = searchQuery(page.q);
      if (q !== undefined) {
        const after = decodeRankCursor(page.cursor);
        const result = await search(tenantId, (trx) =>
          sql<DocumentRow>`
          with ranked as (${documentRanks(tenantId, q, { sourceId: page.source_id })})
          select d.id, d.title, d.content, d.language, d.source_id, d.page_id, d.url, d.created_at, d.updated_at,
                 r.rank,
                 -- The excerpt comes from the text that matched best: the document, or a translation.
                 (select ts_headline(p.cfg, p.content, websearch_to_tsquery(p.cfg, ${q}), ${HEADLINE_OPTIONS})
                  from (
                    select d.search_config as cfg, d.content,
                           ts_rank_cd(d.search_vector, websearch_to_tsquery(d.search_config, ${q})) as rank, 0 as pass
                    union all
                    select t.search_config, t.content,
                           ts_rank_cd(t.search_vector, websearch_to_tsquery(t.search_config, ${q})), 1
                    from document_translations t
                    where t.tenant_id = ${tenantId} and t.document_id = d.id
                      and t.search_vector @@ websearch_to_tsquery(t.search_config, ${q})
                  ) p
                  order by p.rank desc, p.pass
                  limit 1) as snippet
          from ranked r join documents d on d.id = r.document_id and d.tenant_id = ${tenantId}
          ${after ? sql`where (r.rank, d.id) < (${after.s}::float8, ${after.i}::uuid)` : sql``}
          order by r.rank desc, d.id desc
          limit ${page.limit + 1}
        `.execute(trx),
        );
        return toList(result.rows, page, toDocumentRecord, (row) => rankCursor(Number(row.rank), row.id));
      }
      let query = db.selectFrom('documents').select(DOCUMENT_COLUMNS).where('tenant_id', '=', tenantId);
      if (page.source_id !== undefined) query = query.where('source_id', '=', page.source_id);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toDocumentRecord, (row) => row.id);
    },

    async get(tenantId: string, id: string): Promise<DocumentRecord> {
      const row = await db
        .selectFrom('documents')
        .select(DOCUMENT_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .executeTakeFirst();
      if (!row) throw new NotFoundError('document', id);
      return toDocumentRecord(row);
    },

    async delete(tenantId: string, id: string) {
      const row = await db
        .deleteFrom('documents')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('document', id);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },

    /**
     * Deletes by `document_ids`, or by `source_id` with `page_ids`, all in one transaction. Ids and
     * pages that name nothing (already gone) are not counted: `deleted_count` says what went.
     */
    async bulkDelete(tenantId: string, input: BulkDeleteInput) {
      const byIds = input.document_ids !== undefined;
      const byPages = input.source_id !== undefined || input.page_ids !== undefined;
      if (byIds && byPages) {
        throw new DomainError(
          'ambiguous_addressing',
          'Send either document_ids, or source_id with page_ids, not both.',
          'document_ids',
        );
      }
      if (!byIds && !byPages) {
        throw new MissingParameterError('document_ids', 'Send document_ids, or source_id with page_ids.');
      }
      if (byIds) {
        const ids = input.document_ids ?? [];
        checkBulkItems('document_ids', ids);
        const result = await db.transaction().execute((trx) =>
          trx
            .deleteFrom('documents')
            .where('tenant_id', '=', tenantId)
            .where('id', 'in', [...new Set(ids)])
            .executeTakeFirst(),
        );
        return { object: 'bulk_delete' as const, deleted_count: Number(result.numDeletedRows) };
      }
      if (input.source_id === undefined) throw new MissingParameterError('source_id', 'page_ids need their source_id.');
      if (input.page_ids === undefined) throw new MissingParameterError('page_ids', 'source_id needs page_ids.');
      const sourceId = input.source_id;
      const pageIds = input.page_ids;
      checkBulkItems('page_ids', pageIds);
      return db.transaction().execute(async (trx) => {
        const source = await trx
          .selectFrom('sources')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', sourceId)
          .executeTakeFirst();
        if (!source) throw new InvalidParametersError('source_id', `No such source: '${sourceId}'.`);
        const result = await trx
          .deleteFrom('documents')
          .where('tenant_id', '=', tenantId)
          .where('source_id', '=', sourceId)
          .where('page_id', 'in', [...new Set(pageIds)])
          .executeTakeFirst();
        return { object: 'bulk_delete' as const, deleted_count: Number(result.numDeletedRows) };
      });
    },

    /** One translation per language; the document's own language counts as taken. */
    async addTranslation(tenantId: string, documentId: string, input: TranslationInput): Promise<TranslationRecord> {
      const language = normalizeLanguage(input.language);
      const document = await db
        .selectFrom('documents')
        .select(['id', 'language'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', documentId)
        .executeTakeFirst();
      if (!document) throw new NotFoundError('document', documentId);
      if (document.language === language) {
        throw new ConflictError(`The document itself is in '${language}'.`, 'language');
      }
      try {
        const row = await writing(async (executor) => {
          const inserted = await executor
            .insertInto('document_translations')
            .values({
              id: newId(),
              tenant_id: tenantId,
              document_id: documentId,
              language,
              title: input.title,
              content: input.content,
              related_questions: input.related_questions ?? '',
              search_config: searchConfigFor(language),
            })
            .returning(TRANSLATION_COLUMNS)
            .executeTakeFirstOrThrow();
          await written(executor, tenantId, [documentId]);
          return inserted;
        });
        return toTranslationRecord(row);
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new ConflictError(`The document already has a '${language}' translation.`, 'language');
        }
        // Deleted since it was read above.
        if (isForeignKeyViolation(error)) throw new NotFoundError('document', documentId);
        throw error;
      }
    },

    async listTranslations(tenantId: string, documentId: string, page: Page) {
      if (!(await documentExists(db, tenantId, documentId))) throw new NotFoundError('document', documentId);
      let query = db
        .selectFrom('document_translations')
        .select(TRANSLATION_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .where('document_id', '=', documentId);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toTranslationRecord, (row) => row.id);
    },

    /**
     * Appends a section (`## heading` + text) to a document of the tenant. A page of a website
     * source is refused: its next sync would overwrite it with the page's text.
     */
    async appendSection(
      trx: Transaction<Database>,
      tenantId: string,
      documentId: string,
      heading: string,
      text: string,
    ): Promise<DocumentRecord> {
      const document = await trx
        .selectFrom('documents')
        .leftJoin('sources', 'sources.id', 'documents.source_id')
        .select(['documents.title', 'documents.content', 'sources.source_type'])
        .where('documents.tenant_id', '=', tenantId)
        .where('documents.id', '=', documentId)
        .forUpdate('documents')
        .executeTakeFirst();
      if (!document) throw new InvalidParametersError('document_id', `No such document: '${documentId}'.`);
      if (document.source_type === 'website') {
        throw new InvalidParametersError(
          'document_id',
          'The document is a page of a website source; its next sync would overwrite the answer.',
        );
      }
      const content = `${document.content}\n\n## ${heading}\n\n${text}`;
      // The answer must start within the part search reads, past the heading. (The body then
      // stays within its bound: an answer holds at most 100,000 characters.)
      const answerStart = characterCount(`${document.content}\n\n## ${heading}\n\n`);
      if (answerStart >= INDEXED_CONTENT_LENGTH) {
        throw new InvalidParametersError(
          'document_id',
          `The document is too long for the answer to be found: search reads a document's first ${INDEXED_CONTENT_LENGTH.toLocaleString('en')} characters. Apply it without document_id, as a new document.`,
        );
      }
      const row = await trx
        .updateTable('documents')
        .set({ content, content_hash: contentHash(document.title, content), updated_at: sql`now()` })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', documentId)
        .returning(DOCUMENT_COLUMNS)
        .executeTakeFirstOrThrow();
      await written(trx, tenantId, [documentId]);
      return toDocumentRecord(row);
    },

    /**
     * Writes a crawl's pages into a website source, in one transaction: new pages added, changed
     * pages updated, unchanged pages left as they are, and pages gone from the site removed.
     * `keep` tells which pages the crawl did not return stay all the same (ones it could not read
     * this time, or never reached).
     */
    async replaceSourcePages(
      tenantId: string,
      sourceId: string,
      pages: PageInput[],
      keep: (pageId: string) => boolean,
    ): Promise<PageSyncResult> {
      return db.transaction().execute(async (trx) => {
        const existing = new Map(
          (
            await trx
              .selectFrom('documents')
              .select(['id', 'page_id', 'content_hash', 'language', 'url'])
              .where('tenant_id', '=', tenantId)
              .where('source_id', '=', sourceId)
              .execute()
          ).map((row) => [row.page_id ?? '', row]),
        );
        const result: PageSyncResult = { added: 0, updated: 0, unchanged: 0, removed: 0 };
        const seen = new Set<string>();
        for (const page of pages) {
          if (seen.has(page.page_id)) continue;
          seen.add(page.page_id);
          const language = normalizeLanguage(page.language);
          const hash = contentHash(page.title, page.content);
          const current = existing.get(page.page_id);
          if (!current) {
            await insertDocument(trx, tenantId, { ...page, language, source_id: sourceId });
            result.added++;
          } else if (current.content_hash !== hash || current.language !== language || current.url !== page.url) {
            await trx
              .updateTable('documents')
              .set({
                title: page.title,
                content: page.content,
                url: page.url,
                language,
                search_config: searchConfigFor(language),
                content_hash: hash,
                updated_at: sql`now()`,
              })
              .where('tenant_id', '=', tenantId)
              .where('id', '=', current.id)
              .execute();
            await written(trx, tenantId, [current.id]);
            result.updated++;
          } else {
            result.unchanged++;
          }
        }
        const gone = [...existing.entries()].filter(([pageId]) => !seen.has(pageId) && !keep(pageId));
        if (gone.length > 0) {
          await trx
            .deleteFrom('documents')
            .where('tenant_id', '=', tenantId)
            .where(
              'id',
              'in',
              gone.map(([, row]) => row.id),
            )
            .execute();
          result.removed = gone.length;
        }
        return result;
      });
    },

    /** Re-indexes a source's documents: each is analysed again with its language's configuration. */
    async reindexSource(tenantId: string, sourceId: string): Promise<number> {
      return writing(async (executor) => {
        const rows = await executor
          .updateTable('documents')
          .set({ search_config: searchConfigSql('language') })
          .where('tenant_id', '=', tenantId)
          .where('source_id', '=', sourceId)
          .returning('id')
          .execute();
        await written(
          executor,
          tenantId,
          rows.map((row) => row.id),
        );
        return rows.length;
      });
    },
  };
}

export type DocumentService = ReturnType<typeof createDocumentService>;
