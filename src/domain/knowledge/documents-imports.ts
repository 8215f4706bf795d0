// Text that comes into documents from elsewhere: an answer appended as a section, a website
// crawl's pages written into their source, and a source's documents analysed again.
import { sql, type Transaction } from 'kysely';
import type { Database } from '../../db/index.js';
import { characterCount } from '../../lib/text.js';
import { InvalidParametersError } from '../errors.js';
import type { DocumentContext } from './documents-context.js';
import { insertDocument } from './documents-crud.js';
import {
  contentHash,
  DOCUMENT_COLUMNS,
  type DocumentRecord,
  INDEXED_CONTENT_LENGTH,
  type PageInput,
  type PageSyncResult,
  toDocumentRecord,
} from './documents-records.js';
import { normalizeLanguage, searchConfigFor, searchConfigSql } from './text-search.js';

/**
 * Appends a section (`## heading` + text) to a document of the tenant. A page of a website
 * source is refused: its next sync would overwrite it with the page's text.
 */
export async function appendSection(
  { written }: DocumentContext,
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
}

/**
 * Writes a crawl's pages into a website source, in one transaction: new pages added, changed
 * pages updated, unchanged pages left as they are, and pages gone from the site removed.
 * `keep` tells which pages the crawl did not return stay all the same (ones it could not read
 * this time, or never reached).
 */
export async function replaceSourcePages(
  ctx: DocumentContext,
  tenantId: string,
  sourceId: string,
  pages: PageInput[],
  keep: (pageId: string) => boolean,
): Promise<PageSyncResult> {
  return ctx.db.transaction().execute(async (trx) => {
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
        await insertDocument(ctx, trx, tenantId, { ...page, language, source_id: sourceId });
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
        await ctx.written(trx, tenantId, [current.id]);
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
}

/** Re-indexes a source's documents: each is analysed again with its language's configuration. */
export async function reindexSource(
  { writing, written }: DocumentContext,
  tenantId: string,
  sourceId: string,
): Promise<number> {
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
}
