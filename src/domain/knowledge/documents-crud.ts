// Documents one at a time and in bulk: create (standing alone or in a manual source), get, delete,
// and delete several by id or by page.
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import {
  ConflictError,
  checkBulkItems,
  DomainError,
  InvalidParametersError,
  MissingParameterError,
  NotFoundError,
  ValidationError,
} from '../errors.js';
import type { DocumentContext, Executor } from './documents-context.js';
import {
  type BulkDeleteInput,
  contentHash,
  DOCUMENT_COLUMNS,
  type DocumentInput,
  type DocumentRecord,
  MAX_PAGE_ID_LENGTH,
  toDocumentRecord,
} from './documents-records.js';
import { DEFAULT_LANGUAGE, normalizeLanguage, searchConfigFor } from './text-search.js';

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

export async function insertDocument(
  { written }: DocumentContext,
  executor: Executor,
  tenantId: string,
  input: DocumentInput,
): Promise<DocumentRecord> {
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

export async function createDocument(
  ctx: DocumentContext,
  tenantId: string,
  input: DocumentInput,
): Promise<DocumentRecord> {
  if (input.page_id !== undefined && input.source_id === undefined) {
    throw new MissingParameterError('source_id', 'page_id names a page of a source: send source_id with it.');
  }
  if (input.page_id !== undefined && Buffer.byteLength(input.page_id) > MAX_PAGE_ID_LENGTH) {
    throw new ValidationError('page_id', `page_id must not pass ${MAX_PAGE_ID_LENGTH} bytes in UTF-8.`);
  }
  if (input.source_id !== undefined) await checkManualSource(ctx.db, tenantId, input.source_id);
  return ctx.writing((executor) => insertDocument(ctx, executor, tenantId, input));
}

export async function getDocument({ db }: DocumentContext, tenantId: string, id: string): Promise<DocumentRecord> {
  const row = await db
    .selectFrom('documents')
    .select(DOCUMENT_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('document', id);
  return toDocumentRecord(row);
}

export async function deleteDocument({ db }: DocumentContext, tenantId: string, id: string) {
  const row = await db
    .deleteFrom('documents')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning('id')
    .executeTakeFirst();
  if (!row) throw new NotFoundError('document', id);
  return { id: row.id, object: 'deleted' as const, deleted: true };
}

/**
 * Deletes by `document_ids`, or by `source_id` with `page_ids`, all in one transaction. Ids and
 * pages that name nothing (already gone) are not counted: `deleted_count` says what went.
 */
export async function bulkDelete(ctx: DocumentContext, tenantId: string, input: BulkDeleteInput) {
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
  if (byIds) return deleteByIds(ctx, tenantId, input.document_ids ?? []);
  if (input.source_id === undefined) throw new MissingParameterError('source_id', 'page_ids need their source_id.');
  if (input.page_ids === undefined) throw new MissingParameterError('page_ids', 'source_id needs page_ids.');
  return deleteByPages(ctx, tenantId, input.source_id, input.page_ids);
}

async function deleteByIds({ db }: DocumentContext, tenantId: string, ids: string[]) {
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

async function deleteByPages({ db }: DocumentContext, tenantId: string, sourceId: string, pageIds: string[]) {
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
}
