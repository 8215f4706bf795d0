// Smart sources (DESIGN.md §7; spec rule 9): a named feed that writes rows into one custom data
// source, tagging each row it writes `smart-source:<id>`. Purging matches that tag in every custom
// data source of the tenant, so it finds the rows wherever they are, and leaves all others.
// When its data source is deleted the smart source remains (`data_source_id` becomes null):
// ingesting then answers `conflict`, while purging still works on the remaining sources.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, InvalidParametersError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import type { BatchRowInput, CustomDataSourceService, RowsUpserted } from './custom-data-sources.js';

export const SmartSourceRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('smart_source'),
    name: Type.String(),
    data_source_id: Nullable(
      Type.String({ format: 'uuid', description: 'The custom data source it writes into; null once deleted.' }),
    ),
    tag: Type.String({ description: 'The tag on every row it writes: `smart-source:<id>`.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'SmartSource' },
);
export type SmartSourceRecord = Static<typeof SmartSourceRecord>;

export const smartSourceTag = (id: string) => `smart-source:${id}`;

const toRecord = (row: {
  id: string;
  name: string;
  data_source_id: string | null;
  created_at: Date;
  updated_at: Date;
}): SmartSourceRecord => ({
  id: row.id,
  object: 'smart_source',
  name: row.name,
  data_source_id: row.data_source_id,
  tag: smartSourceTag(row.id),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export function createSmartSourceService({ db, dataSources }: { db: Db; dataSources: CustomDataSourceService }) {
  async function find(tenantId: string, id: string) {
    const row = await db
      .selectFrom('smart_sources')
      .select(['id', 'name', 'data_source_id', 'created_at', 'updated_at'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw new NotFoundError('smart source', id);
    return row;
  }

  return {
    async createSmartSource(tenantId: string, input: { name: string; data_source: string }) {
      const dataSourceId = await dataSources.resolveSourceId(tenantId, input.data_source);
      if (!dataSourceId) {
        throw new InvalidParametersError(
          'data_source',
          `data_source '${input.data_source}' names no custom data source of this workspace.`,
        );
      }
      const row = await db
        .insertInto('smart_sources')
        .values({ id: newId(), tenant_id: tenantId, name: input.name, data_source_id: dataSourceId })
        .returning(['id', 'name', 'data_source_id', 'created_at', 'updated_at'])
        .executeTakeFirstOrThrow();
      return toRecord(row);
    },

    async listSmartSources(tenantId: string, page: Page) {
      let query = db
        .selectFrom('smart_sources')
        .select(['id', 'name', 'data_source_id', 'created_at', 'updated_at'])
        .where('tenant_id', '=', tenantId);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toRecord, (row) => row.id);
    },

    async getSmartSource(tenantId: string, id: string) {
      return toRecord(await find(tenantId, id));
    },

    /** Removes the smart source; the rows it wrote stay (purge them first to remove them). */
    async deleteSmartSource(tenantId: string, id: string) {
      const row = await db
        .deleteFrom('smart_sources')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('smart source', id);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },

    async ingest(tenantId: string, id: string, rows: BatchRowInput[]): Promise<RowsUpserted> {
      const source = await find(tenantId, id);
      if (source.data_source_id === null) {
        throw new ConflictError(
          'The data source of this smart source was deleted; create a new smart source to ingest again.',
        );
      }
      try {
        return await dataSources.upsertTaggedRows(tenantId, source.data_source_id, rows, smartSourceTag(source.id));
      } catch (error) {
        // The data source was deleted between the two reads.
        if (error instanceof NotFoundError) {
          throw new ConflictError('The data source of this smart source was deleted.');
        }
        throw error;
      }
    },

    /** Spec rule 9: every row this smart source ever ingested, in any data source, by tag. */
    async purgeRows(tenantId: string, id: string) {
      const source = await find(tenantId, id);
      const deleted = await dataSources.deleteRowsTagged(tenantId, smartSourceTag(source.id));
      return { object: 'purge' as const, deleted_count: deleted };
    },
  };
}

export type SmartSourceService = ReturnType<typeof createSmartSourceService>;
