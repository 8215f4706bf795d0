// Writing the rows of a custom data source: one row or a batch of them, upserted by external id
// in one statement, and a row deleted.
import { type Kysely, sql } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { checkBulkItems, NotFoundError, ValidationError } from '../errors.js';
import {
  type BatchRowInput,
  ROW_COLUMNS,
  type RowInput,
  type RowRecord,
  type RowsUpserted,
  type StoredRow,
  toRowRecord,
} from './data-source-records.js';
import { CONTROL, type NormalizedRow, normalizeRow } from './row-rules.js';
import { type SourceLookup, sqlState } from './source-lookup.js';

export interface RowWriteDeps {
  db: Db;
  sources: SourceLookup;
}

/** SQLSTATE 54000: PostgreSQL caps a search vector (tsvector) at 1 MiB. */
const isProgramLimit = (error: unknown): boolean => sqlState(error) === '54000';

/** UTF-8 byte order: PostgreSQL's `collate "C"`, whatever the database's own collation. */
const compareKeys = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * One INSERT … ON CONFLICT for every row; `xmax = 0` tells a fresh insert from an update. The rows
 * go in `external_id` order, the order every write and delete of several rows locks them in, so
 * two batches over the same rows (sent in different orders) wait for each other, not deadlock.
 */
async function writeRows(
  executor: Kysely<Database>,
  tableName: string,
  rows: NormalizedRow[],
  textParam: string,
): Promise<{ record: RowRecord; created: boolean }[]> {
  const inLockOrder = [...rows].sort((a, b) => compareKeys(a.external_id, b.external_id));
  const values = inLockOrder.map(
    (row) =>
      sql`(${newId()}::uuid, ${row.external_id}, ${JSON.stringify(row.data)}::jsonb, ${row.tags}::text[], ${row.searchable_text}, ${row.content}, now())`,
  );
  const statement = sql<StoredRow & { inserted: boolean }>`
    insert into ${sql.table(tableName)} (id, external_id, data, tags, searchable_text, content, updated_at)
    values ${sql.join(values)}
    on conflict (external_id) do update set
      data = excluded.data,
      tags = excluded.tags,
      searchable_text = excluded.searchable_text,
      content = excluded.content,
      updated_at = excluded.updated_at
    returning ${ROW_COLUMNS}, null::float8 as score, (xmax = 0) as inserted`;
  let result: Awaited<ReturnType<typeof statement.execute>>;
  try {
    result = await statement.execute(executor);
  } catch (error) {
    if (isProgramLimit(error)) {
      throw new ValidationError(
        textParam,
        'searchable_text and content hold too many distinct words to index for search (the index of one row is ' +
          'limited to 1 MiB); put bulk text in data instead.',
      );
    }
    throw error;
  }
  const byExternalId = new Map(result.rows.map((row) => [row.external_id, row]));
  return rows.map((row) => {
    const stored = byExternalId.get(row.external_id) as StoredRow & { inserted: boolean };
    return { record: toRowRecord(stored), created: Boolean(stored.inserted) };
  });
}

/** Creates or replaces the row with this external id; omitted optional fields become empty. */
export async function upsertRow(
  { db, sources }: RowWriteDeps,
  tenantId: string,
  idOrSlug: string,
  externalId: string,
  input: RowInput,
): Promise<{ record: RowRecord; created: boolean }> {
  return sources.onTable(tenantId, idOrSlug, async (_table, source) => {
    const row = normalizeRow('', externalId, input, source.fields);
    const [written] = await writeRows(db, source.table_name, [row], 'content');
    return written as { record: RowRecord; created: boolean };
  });
}

/**
 * Checks a batch (1–100 rows, distinct external ids) and writes it all or not at all; with
 * `extraTag` (a smart source's), every row also carries that tag.
 */
export async function upsertBatch(
  { db, sources }: RowWriteDeps,
  tenantId: string,
  idOrSlug: string,
  rows: BatchRowInput[],
  extraTag?: string,
): Promise<RowsUpserted> {
  checkBulkItems('rows', rows);
  const seen = new Map<string, number>();
  rows.forEach((row, i) => {
    const earlier = seen.get(row.external_id);
    if (earlier !== undefined) {
      throw new ValidationError(
        `rows[${i}].external_id`,
        `rows[${i}].external_id repeats rows[${earlier}].external_id.`,
      );
    }
    seen.set(row.external_id, i);
  });
  return sources.onTable(tenantId, idOrSlug, async (_table, source) => {
    const normalized = rows.map((row, i) => normalizeRow(`rows[${i}]`, row.external_id, row, source.fields, extraTag));
    // One statement: atomic on its own, so the batch is all-or-nothing.
    const written = await writeRows(db, source.table_name, normalized, 'rows');
    const created = written.filter((w) => w.created).length;
    return {
      object: 'rows_upserted' as const,
      created_count: created,
      updated_count: written.length - created,
      data: written.map((w) => w.record),
    };
  });
}

export async function deleteRow({ db, sources }: RowWriteDeps, tenantId: string, idOrSlug: string, externalId: string) {
  return sources.onTable(tenantId, idOrSlug, async (table) => {
    if (CONTROL.test(externalId)) throw new NotFoundError('row', externalId);
    const { rows } = await sql<{ id: string }>`
      delete from ${table} where external_id = ${externalId} returning id`.execute(db);
    const row = rows[0];
    if (!row) throw new NotFoundError('row', externalId);
    return { id: row.id, object: 'deleted' as const, deleted: true };
  });
}
