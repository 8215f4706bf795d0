// Custom data sources (DESIGN.md §7; spec rules 7 and 8): tenant-defined tables of rows keyed by
// `external_id`, which the agent looks things up in. Each source owns a real backing table,
// created in the same transaction as its metadata row and dropped in the same transaction as its
// deletion. The table name is generated (`cds_` + the source UUID's hex) and stored in the
// metadata row; it reaches SQL only through `sql.table`/`sql.id`, never from user input.
// Isolation: the backing table has no `tenant_id` of its own: a table belongs to exactly one
// source, and every statement reaches it only after looking the source up by tenant.
import type { Db } from '../../db/index.js';
import type { SearchRunner } from '../knowledge/text-search.js';
import type { Page } from '../pagination.js';
import type { BatchRowInput, NewDataSource, RowInput, RowQuery } from './data-source-records.js';
import { clearRows, deleteRowsTagged } from './row-clearing.js';
import { createRowReader, getRow, listRows } from './row-reads.js';
import { deleteRow, upsertBatch, upsertRow } from './row-writes.js';
import { createSourceLookup } from './source-lookup.js';
import { createSource, deleteSource, getSource, listSources, resolveSourceId } from './source-tables.js';

export {
  type BatchRowInput,
  DataSourceRecord,
  FieldDeclaration,
  type FieldType,
  MAX_DATA_DEPTH,
  MAX_EXTERNAL_ID_LENGTH,
  MAX_ROW_TAGS,
  type NewDataSource,
  RowData,
  type RowInput,
  type RowQuery,
  RowRecord,
  RowsUpserted,
  SLUG_PATTERN,
} from './data-source-records.js';
export { ROW_READ_COALESCING } from './row-reads.js';

export function createCustomDataSourceService({
  db,
  search,
  maxSources,
}: {
  db: Db;
  search: SearchRunner;
  /** Custom data sources one workspace may hold (CUSTOM_DATA_SOURCES_MAX): each is a table. */
  maxSources: number;
}) {
  const sources = createSourceLookup(db);
  const rows = createRowReader(db);
  const writes = { db, sources };

  return {
    createSource: (tenantId: string, input: NewDataSource) => createSource({ db, maxSources }, tenantId, input),
    listSources: (tenantId: string, page: Page) => listSources(db, tenantId, page),
    getSource: (tenantId: string, idOrSlug: string) => getSource(db, tenantId, idOrSlug),
    deleteSource: (tenantId: string, idOrSlug: string) => deleteSource({ db, sources }, tenantId, idOrSlug),
    upsertRow: (tenantId: string, idOrSlug: string, externalId: string, input: RowInput) =>
      upsertRow(writes, tenantId, idOrSlug, externalId, input),
    upsertRows: (tenantId: string, idOrSlug: string, rows: BatchRowInput[]) =>
      upsertBatch(writes, tenantId, idOrSlug, rows),
    /** For smart sources: the same batch write, every row also tagged `extraTag`. */
    upsertTaggedRows: (tenantId: string, sourceId: string, rows: BatchRowInput[], extraTag: string) =>
      upsertBatch(writes, tenantId, sourceId, rows, extraTag),
    getRow: (tenantId: string, idOrSlug: string, externalId: string) =>
      getRow({ sources, rows }, tenantId, idOrSlug, externalId),
    deleteRow: (tenantId: string, idOrSlug: string, externalId: string) =>
      deleteRow(writes, tenantId, idOrSlug, externalId),
    listRows: (tenantId: string, idOrSlug: string, query: RowQuery) =>
      listRows({ db, search, sources }, tenantId, idOrSlug, query),
    clearRows: (tenantId: string, idOrSlug: string) => clearRows({ db, sources }, tenantId, idOrSlug),
    resolveSourceId: (tenantId: string, idOrSlug: string) => resolveSourceId(db, tenantId, idOrSlug),
    deleteRowsTagged: (tenantId: string, tag: string) => deleteRowsTagged(db, tenantId, tag),
  };
}

export type CustomDataSourceService = ReturnType<typeof createCustomDataSourceService>;
