// Knowledge sources themselves: create, list, get (each with its document count), update, delete.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { MissingParameterError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import {
  type CreateSourceInput,
  SOURCE_COLUMNS,
  type SourceRecord,
  type SourceRow,
  toSourceRecord,
  type UpdateSourceInput,
} from './sources-records.js';
import { startUrl } from './website-connector.js';

/** A website's domain must name an http(s) site: `example.com` or `https://example.com/help`. */
function checkDomain(domain: string): string {
  const trimmed = domain.trim();
  try {
    startUrl(trimmed);
  } catch (error) {
    throw new ValidationError('domain', (error as Error).message);
  }
  return trimmed;
}

function selectSources(db: Db, tenantId: string) {
  return db
    .selectFrom('sources')
    .select(SOURCE_COLUMNS)
    .select((eb) =>
      eb
        .selectFrom('documents')
        .select(sql<number>`count(*)::int`.as('n'))
        .whereRef('documents.source_id', '=', 'sources.id')
        .where('documents.tenant_id', '=', tenantId)
        .as('document_count'),
    )
    .where('tenant_id', '=', tenantId);
}

export async function getSource(db: Db, tenantId: string, id: string): Promise<SourceRecord> {
  const row = (await selectSources(db, tenantId).where('id', '=', id).executeTakeFirst()) as SourceRow | undefined;
  if (!row) throw new NotFoundError('source', id);
  return toSourceRecord(row);
}

export async function createSource(db: Db, tenantId: string, input: CreateSourceInput): Promise<SourceRecord> {
  let domain: string | null = null;
  if (input.domain !== undefined) domain = checkDomain(input.domain);
  else if (input.source_type === 'website') {
    throw new MissingParameterError('domain', 'A website source needs the domain to crawl.');
  }
  const row = await db
    .insertInto('sources')
    .values({
      id: newId(),
      tenant_id: tenantId,
      name: input.name,
      source_type: input.source_type,
      external_id: input.source_id ?? null,
      domain,
      additional_info: JSON.stringify(input.additional_info ?? {}),
      auto_sync_enabled: input.auto_sync_enabled ?? false,
    })
    .returning(SOURCE_COLUMNS)
    .executeTakeFirstOrThrow();
  return toSourceRecord({ ...row, document_count: 0 });
}

export async function listSources(db: Db, tenantId: string, page: Page) {
  let query = selectSources(db, tenantId);
  query = newestFirst(query, page);
  const rows = (await query.execute()) as SourceRow[];
  return toList(rows, page, toSourceRecord, (row) => row.id);
}

/** Spec: Update Source — changes the fields sent and returns the source record. */
export async function updateSource(
  db: Db,
  tenantId: string,
  id: string,
  input: UpdateSourceInput,
): Promise<SourceRecord> {
  const set: Record<string, unknown> = {};
  if (input.name !== undefined) set.name = input.name;
  if (input.source_id !== undefined) set.external_id = input.source_id;
  if (input.domain !== undefined) set.domain = checkDomain(input.domain);
  if (input.additional_info !== undefined) set.additional_info = JSON.stringify(input.additional_info);
  if (input.auto_sync_enabled !== undefined) set.auto_sync_enabled = input.auto_sync_enabled;
  if (Object.keys(set).length > 0) {
    const result = await db
      .updateTable('sources')
      .set({ ...set, updated_at: sql`now()` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) throw new NotFoundError('source', id);
  }
  return getSource(db, tenantId, id);
}

/** Deletes the source with its documents (and their translations). */
export async function deleteSource(db: Db, tenantId: string, id: string) {
  const row = await db
    .deleteFrom('sources')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning('id')
    .executeTakeFirst();
  if (!row) throw new NotFoundError('source', id);
  return { id: row.id, object: 'deleted' as const, deleted: true };
}
