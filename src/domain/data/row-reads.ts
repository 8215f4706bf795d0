// Reading the rows of a custom data source: one row by external id (the hottest statement of the
// API, coalesced), and a page of rows, newest first or ranked by full-text search.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { type CoalesceOptions, coalescedStatements } from '../../db/index.js';
import { NotFoundError } from '../errors.js';
import { type SearchRunner, searchQuery } from '../knowledge/text-search.js';
import { decodeIdCursor, decodeRankCursor, rankCursor, toList } from '../pagination.js';
import { ROW_COLUMNS, type RowQuery, type RowRecord, type StoredRow, toRowRecord } from './data-source-records.js';
import { CONTROL, checkText } from './row-rules.js';
import { SOURCE_CACHE_MAX, type SourceLookup } from './source-lookup.js';

/**
 * Row reads coalesced (db/coalesce.ts): two statements of a table at once (of the pool's 10 on
 * PostgreSQL, 4 on PGlite), the second with the reads of one turn of the event loop, and the reads
 * beyond them wait, 32 to a statement at most.
 */
export const ROW_READ_COALESCING: CoalesceOptions = { maxInFlight: 2, maxItems: 32 };

/** Reads rows of a backing table by external id, coalesced. */
export type RowReader = ReturnType<typeof createRowReader>;

export function createRowReader(db: Db) {
  // The row read is the hottest statement of the API: its texts (one key, and several for reads
  // coalesced: db/coalesce.ts) are built once per table and kept (Kysely would build them on every
  // call), which also lets the prepared statements be found fast.
  const rowReads = new Map<string, { one: string; many: string }>();
  function rowReadStatements(tableName: string): { one: string; many: string } {
    let texts = rowReads.get(tableName);
    if (texts === undefined) {
      const select = sql`select ${ROW_COLUMNS}, null::float8 as score from ${sql.table(tableName)}`;
      texts = {
        one: sql`${select} where external_id = ${''}`.compile(db).sql,
        many: sql`${select} where external_id = any(${''}::text[])`.compile(db).sql,
      };
      if (rowReads.size >= SOURCE_CACHE_MAX) rowReads.clear();
      rowReads.set(tableName, texts);
    }
    return texts;
  }

  return coalescedStatements<StoredRow>(db, rowReadStatements, (row) => row.external_id, ROW_READ_COALESCING);
}

export async function getRow(
  { sources, rows }: { sources: SourceLookup; rows: RowReader },
  tenantId: string,
  idOrSlug: string,
  externalId: string,
): Promise<RowRecord> {
  return sources.onTable(tenantId, idOrSlug, async (_table, source) => {
    if (CONTROL.test(externalId)) throw new NotFoundError('row', externalId);
    const row = await rows.read(source.table_name, externalId);
    if (!row) throw new NotFoundError('row', externalId);
    return toRowRecord(row);
  });
}

/**
 * Without `q`: newest first, cursor = last id. With `q` (websearch syntax): only matching rows,
 * best `score` first (ts_rank; ties newest first), cursor = last (score, id).
 */
export async function listRows(
  { db, search, sources }: { db: Db; search: SearchRunner; sources: SourceLookup },
  tenantId: string,
  idOrSlug: string,
  rowQuery: RowQuery,
) {
  const query = { ...rowQuery, q: searchQuery(rowQuery.q) };
  checkText('q', query.q);
  checkText('tag', query.tag);
  return sources.onTable(tenantId, idOrSlug, async (table) => {
    const tagFilter = query.tag === undefined ? sql`true` : sql`tags @> array[${query.tag}]::text[]`;
    if (query.q === undefined) {
      const after = decodeIdCursor(query.cursor);
      const { rows } = await sql<StoredRow>`
        select ${ROW_COLUMNS}, null::float8 as score from ${table}
        where ${tagFilter} ${after ? sql`and id < ${after}::uuid` : sql``}
        order by id desc
        limit ${query.limit + 1}`.execute(db);
      return toList(rows, query, toRowRecord, (row) => row.id);
    }
    const after = decodeRankCursor(query.cursor);
    // float8 carries the float4 rank exactly, so the cursor's score compares equal to it.
    const { rows } = await search(tenantId, (trx) =>
      sql<StoredRow>`
      select * from (
        select ${ROW_COLUMNS}, ts_rank(search, query)::float8 as score
        from ${table}, websearch_to_tsquery('simple', ${query.q}) as query
        where search @@ query and ${tagFilter}
      ) as ranked
      ${after ? sql`where (score, id) < (${after.s}::float8, ${after.i}::uuid)` : sql``}
      order by score desc, id desc
      limit ${query.limit + 1}`.execute(trx),
    );
    return toList(rows, query, toRowRecord, (row) => rankCursor(Number(row.score), row.id));
  });
}
