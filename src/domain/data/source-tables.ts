// Custom data sources themselves: create (the metadata row and its backing table, in one
// transaction, within the workspace's limit), list, get, resolve, and delete (the row and the
// table go together).
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { isUuid, newId } from '../../lib/ids.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { type DataSourceRecord, type NewDataSource, SOURCE_COLUMNS, toSourceRecord } from './data-source-records.js';
import { checkFields } from './row-rules.js';
import { findSource, type SourceLookup, sourceKey } from './source-lookup.js';

const backingTableName = (sourceId: string) => `cds_${sourceId.replace(/-/g, '')}`;

/** The backing table of a source, with its search and tag indexes. */
async function createBackingTable(trx: Transaction<Database>, tableName: string): Promise<void> {
  const table = sql.table(tableName);
  // DDL takes no parameters: every name below is generated, quoted by sql.table/sql.id.
  // Full-text search: searchable_text ranks above content ('simple': no stemming, any language).
  await sql`create table ${table} (
      id uuid primary key,
      external_id text not null unique,
      data jsonb not null,
      tags text[] not null default '{}',
      searchable_text text not null default '',
      content text not null default '',
      search tsvector generated always as (
        setweight(to_tsvector('simple', searchable_text), 'A') ||
        setweight(to_tsvector('simple', content), 'B')
      ) stored,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(trx);
  await sql`create index ${sql.id(`${tableName}_search`)} on ${table} using gin (search)`.execute(trx);
  await sql`create index ${sql.id(`${tableName}_tags`)} on ${table} using gin (tags)`.execute(trx);
}

export async function createSource(
  { db, maxSources }: { db: Db; maxSources: number },
  tenantId: string,
  input: NewDataSource,
): Promise<DataSourceRecord> {
  if (isUuid(input.slug)) {
    throw new ValidationError('slug', 'slug must not have the form of a UUID: paths read a UUID as an id.');
  }
  const fields = input.fields ?? [];
  checkFields(fields);
  const id = newId();
  const tableName = backingTableName(id);
  try {
    return await db.transaction().execute(async (trx) => {
      // Each source is a table of the database: a workspace holds a bounded number. Its
      // creations take their turn on its tenant row, so two at once cannot both pass the count.
      // FOR NO KEY UPDATE, not FOR UPDATE: that one conflicts with the FOR KEY SHARE every
      // insert of a row naming the tenant takes (its foreign key), so it would hold back all
      // the workspace's writes while the table is made, and wait behind any open one.
      await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).forNoKeyUpdate().execute();
      const held = await trx
        .selectFrom('custom_data_sources')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('tenant_id', '=', tenantId)
        .executeTakeFirstOrThrow();
      if (held.n >= maxSources) {
        throw new ConflictError(
          `This workspace holds ${held.n} custom data sources, its limit (CUSTOM_DATA_SOURCES_MAX); delete one before creating another.`,
        );
      }
      const row = await trx
        .insertInto('custom_data_sources')
        .values({
          id,
          tenant_id: tenantId,
          name: input.name,
          slug: input.slug,
          fields: JSON.stringify(fields),
          table_name: tableName,
        })
        .returning(SOURCE_COLUMNS)
        .executeTakeFirstOrThrow();
      await createBackingTable(trx, tableName);
      return toSourceRecord(row);
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ConflictError(`A custom data source with slug '${input.slug}' already exists.`, 'slug');
    }
    throw error;
  }
}

export async function listSources(db: Db, tenantId: string, page: Page) {
  let query = db.selectFrom('custom_data_sources').select(SOURCE_COLUMNS).where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toSourceRecord, (row) => row.id);
}

export async function getSource(db: Kysely<Database>, tenantId: string, idOrSlug: string): Promise<DataSourceRecord> {
  return toSourceRecord(await findSource(db, tenantId, idOrSlug));
}

/** The id of a source of this tenant named by id or slug, or undefined. */
export async function resolveSourceId(
  db: Kysely<Database>,
  tenantId: string,
  idOrSlug: string,
): Promise<string | undefined> {
  try {
    return (await findSource(db, tenantId, idOrSlug)).id;
  } catch (error) {
    if (error instanceof NotFoundError) return undefined;
    throw error;
  }
}

/** Spec rule 8: the metadata row and the backing table go together, in one transaction. */
export async function deleteSource(
  { db, sources }: { db: Db; sources: SourceLookup },
  tenantId: string,
  idOrSlug: string,
) {
  const key = sourceKey(idOrSlug);
  if (!key) throw new NotFoundError('custom data source', idOrSlug);
  const deleted = await db.transaction().execute(async (trx) => {
    const row = await trx
      .deleteFrom('custom_data_sources')
      .where('tenant_id', '=', tenantId)
      .where(key.column, '=', key.value)
      .returning(['id', 'table_name'])
      .executeTakeFirst();
    if (!row) throw new NotFoundError('custom data source', idOrSlug);
    await sql`drop table if exists ${sql.table(row.table_name)}`.execute(trx);
    return { id: row.id, object: 'deleted' as const, deleted: true };
  });
  sources.forget();
  return deleted;
}
