// Translations of a document: one per language, the document's own language counting as taken.
import { isForeignKeyViolation, isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { DocumentContext, Executor } from './documents-context.js';
import {
  TRANSLATION_COLUMNS,
  type TranslationInput,
  type TranslationRecord,
  toTranslationRecord,
} from './documents-records.js';
import { normalizeLanguage, searchConfigFor } from './text-search.js';

async function documentExists(executor: Executor, tenantId: string, id: string): Promise<boolean> {
  const row = await executor
    .selectFrom('documents')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row !== undefined;
}

/** One translation per language; the document's own language counts as taken. */
export async function addTranslation(
  { db, written, writing }: DocumentContext,
  tenantId: string,
  documentId: string,
  input: TranslationInput,
): Promise<TranslationRecord> {
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
}

export async function listTranslations({ db }: DocumentContext, tenantId: string, documentId: string, page: Page) {
  if (!(await documentExists(db, tenantId, documentId))) throw new NotFoundError('document', documentId);
  let query = db
    .selectFrom('document_translations')
    .select(TRANSLATION_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('document_id', '=', documentId);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toTranslationRecord, (row) => row.id);
}
