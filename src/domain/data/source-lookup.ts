// How a row operation reaches its source's backing table: the source looked up by tenant and by id
// or slug (at most once a second per instance), and the work run on its table, looked up afresh
// and tried once more when the table went away meanwhile.
import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import { isUuid } from '../../lib/ids.js';
import { NotFoundError } from '../errors.js';
import { SLUG_PATTERN, SOURCE_COLUMNS, type SourceRow } from './data-source-records.js';

const SLUG = new RegExp(SLUG_PATTERN);

/** How a path names a source: a UUID is an id, anything else a slug; undefined names none. */
export function sourceKey(idOrSlug: string): { column: 'id' | 'slug'; value: string } | undefined {
  if (isUuid(idOrSlug)) return { column: 'id', value: idOrSlug.toLowerCase() };
  return SLUG.test(idOrSlug) ? { column: 'slug', value: idOrSlug } : undefined;
}

export const sqlState = (error: unknown): unknown =>
  typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
/** SQLSTATE 42P01: the backing table went away under us (the source was deleted meanwhile). */
const isUndefinedTable = (error: unknown): boolean => sqlState(error) === '42P01';

/** The source named by id (a UUID) or slug (anything else), in this tenant only. */
export async function findSource(
  executor: Kysely<Database>,
  tenantId: string,
  idOrSlug: string,
  lock?: 'share',
): Promise<SourceRow> {
  const key = sourceKey(idOrSlug);
  if (!key) throw new NotFoundError('custom data source', idOrSlug);
  let query = executor
    .selectFrom('custom_data_sources')
    .select(SOURCE_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where(key.column, '=', key.value);
  if (lock === 'share') query = query.forShare();
  const row = await query.executeTakeFirst();
  if (!row) throw new NotFoundError('custom data source', idOrSlug);
  return row;
}

// The source behind a row route is looked up at most once a second per instance, so a row read
// is one query. A source dropped (or dropped and made again) meanwhile shows up as a missing
// backing table: the source is then looked up afresh and the work tried once more.
const SOURCE_CACHE_MS = 1000;
/** Entries a per-table cache holds before it starts over. */
export const SOURCE_CACHE_MAX = 10_000;

export interface SourceLookup {
  /** Runs `work` on the source's backing table; a table dropped meanwhile reads as not found. */
  onTable<T>(
    tenantId: string,
    idOrSlug: string,
    work: (table: RawBuilder<unknown>, source: SourceRow) => Promise<T>,
  ): Promise<T>;
  /** Forgets every source looked up (one was deleted). */
  forget(): void;
}

export function createSourceLookup(db: Db): SourceLookup {
  const sourceCache = new Map<string, { source: SourceRow; at: number }>();

  async function lookupSource(tenantId: string, idOrSlug: string, fresh: boolean): Promise<SourceRow> {
    const cacheKey = `${tenantId}\u0000${idOrSlug}`;
    const hit = sourceCache.get(cacheKey);
    if (!fresh && hit && Date.now() - hit.at < SOURCE_CACHE_MS) return hit.source;
    sourceCache.delete(cacheKey);
    const source = await findSource(db, tenantId, idOrSlug);
    if (sourceCache.size >= SOURCE_CACHE_MAX) sourceCache.clear();
    sourceCache.set(cacheKey, { source, at: Date.now() });
    return source;
  }

  return {
    async onTable(tenantId, idOrSlug, work) {
      const source = await lookupSource(tenantId, idOrSlug, false);
      try {
        return await work(sql.table(source.table_name), source);
      } catch (error) {
        if (!isUndefinedTable(error)) throw error;
      }
      const current = await lookupSource(tenantId, idOrSlug, true);
      try {
        return await work(sql.table(current.table_name), current);
      } catch (error) {
        if (isUndefinedTable(error)) throw new NotFoundError('custom data source', idOrSlug);
        throw error;
      }
    },
    forget: () => sourceCache.clear(),
  };
}
