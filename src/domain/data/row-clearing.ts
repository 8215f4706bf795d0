// Emptying custom data sources: every row of one source (spec rule 7), or every row carrying a tag
// in all the tenant's sources (a smart source's purge, spec rule 9).
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import type { SourceLookup } from './source-lookup.js';

/**
 * Spec rule 7: one DELETE empties the table; the source, its table and its fields remain. The
 * table is locked against writes first (reads go on): a DELETE alone locks rows in the table's
 * physical order, and a batch write holding some of them in `external_id` order would deadlock
 * with it. Locked, the clear waits for the writes under way and the next ones wait for it.
 */
export async function clearRows(
  { db, sources }: { db: Db; sources: SourceLookup },
  tenantId: string,
  idOrSlug: string,
) {
  return sources.onTable(tenantId, idOrSlug, (table) =>
    db.transaction().execute(async (trx) => {
      await sql`lock table ${table} in share row exclusive mode`.execute(trx);
      const result = await sql`delete from ${table}`.execute(trx);
      return { object: 'rows_cleared' as const, deleted_count: Number(result.numAffectedRows ?? 0n) };
    }),
  );
}

/**
 * Deletes every row carrying `tag` in every data source of the tenant, in one transaction.
 * The sources are locked for share, so none is dropped halfway.
 */
export async function deleteRowsTagged(db: Db, tenantId: string, tag: string): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const sources = await trx
      .selectFrom('custom_data_sources')
      .select('table_name')
      .where('tenant_id', '=', tenantId)
      .orderBy('id')
      .forShare()
      .execute();
    let deleted = 0;
    for (const source of sources) {
      // Rows locked in `external_id` order first, as writes lock them: a purge racing an ingest
      // of the same rows then waits for it rather than deadlocking.
      const table = sql.table(source.table_name);
      const result = await sql`
        delete from ${table} where external_id in (
          select external_id from ${table} where tags @> array[${tag}]::text[]
          order by external_id collate "C" for update)`.execute(trx);
      deleted += Number(result.numAffectedRows ?? 0n);
    }
    return deleted;
  });
}
