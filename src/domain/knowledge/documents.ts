// Documents and their translations: the tenant's knowledge, searched with PostgreSQL full-text
// search (src/domain/knowledge/search.ts). A document either stands alone, belongs to a `manual`
// source (created through the API), or is a page of a `website` source (written by its sync,
// `page_id` = the page's URL path). Translations: one per language (DESIGN.md §7).
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import type { Page } from '../pagination.js';
import { documentContext, type Executor } from './documents-context.js';
import { bulkDelete, createDocument, deleteDocument, getDocument, insertDocument } from './documents-crud.js';
import { appendSection, reindexSource, replaceSourcePages } from './documents-imports.js';
import { listDocuments } from './documents-listing.js';
import type { BulkDeleteInput, DocumentInput, PageInput, TranslationInput } from './documents-records.js';
import { addTranslation, listTranslations } from './documents-translations.js';
import type { PassagesWritten } from './embeddings/index.js';
import type { SearchRunner } from './text-search.js';

export {
  type BulkDeleteInput,
  type DocumentInput,
  DocumentRecord,
  INDEXED_CONTENT_LENGTH,
  MAX_CONTENT_LENGTH,
  MAX_PAGE_ID_LENGTH,
  type PageInput,
  type PageSyncResult,
  type TranslationInput,
  TranslationRecord,
} from './documents-records.js';

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
  const ctx = documentContext(db, search, passagesWritten);
  return {
    insertDocument: (executor: Executor, tenantId: string, input: DocumentInput) =>
      insertDocument(ctx, executor, tenantId, input),
    create: (tenantId: string, input: DocumentInput) => createDocument(ctx, tenantId, input),
    list: (tenantId: string, page: Page & { source_id?: string | undefined; q?: string | undefined }) =>
      listDocuments(ctx, tenantId, page),
    get: (tenantId: string, id: string) => getDocument(ctx, tenantId, id),
    delete: (tenantId: string, id: string) => deleteDocument(ctx, tenantId, id),
    bulkDelete: (tenantId: string, input: BulkDeleteInput) => bulkDelete(ctx, tenantId, input),
    addTranslation: (tenantId: string, documentId: string, input: TranslationInput) =>
      addTranslation(ctx, tenantId, documentId, input),
    listTranslations: (tenantId: string, documentId: string, page: Page) =>
      listTranslations(ctx, tenantId, documentId, page),
    appendSection: (trx: Transaction<Database>, tenantId: string, documentId: string, heading: string, text: string) =>
      appendSection(ctx, trx, tenantId, documentId, heading, text),
    replaceSourcePages: (tenantId: string, sourceId: string, pages: PageInput[], keep: (pageId: string) => boolean) =>
      replaceSourcePages(ctx, tenantId, sourceId, pages, keep),
    reindexSource: (tenantId: string, sourceId: string) => reindexSource(ctx, tenantId, sourceId),
  };
}

export type DocumentService = ReturnType<typeof createDocumentService>;
