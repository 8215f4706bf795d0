// Smart sources (scope `knowledge`, DESIGN.md §7): create, list, get, delete; ingest rows into the
// custom data source they feed (each tagged `smart-source:<id>`); purge every row they ingested
// (spec rule 9).
import { Type } from '@sinclair/typebox';
import { RowsUpserted } from '../../domain/data/custom-data-sources.js';
import { SmartSourceRecord } from '../../domain/data/smart-sources.js';
import { Deleted, ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';
import { RowsBody } from './custom-data-sources.js';

const TAG = 'Smart sources';

const Params = Type.Object({ smart_source_id: Uuid });

export const smartSourceOperations = [
  defineOperation({
    id: 'createSmartSource',
    method: 'POST',
    path: '/api/v1/smart-sources',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Create a smart source',
    description:
      'Creates a smart source that writes into the custom data source named by `data_source` (its id or ' +
      'slug). Rows it ingests are tagged `smart-source:<id>`, so they can be purged together later. ' +
      'Returns the smart source.',
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 200 }),
        data_source: Type.String({ minLength: 1, maxLength: 100, description: 'Custom data source id or slug.' }),
      },
      { additionalProperties: false },
    ),
    response: SmartSourceRecord,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: ({ tenantId, body, services }) => services.smartSources.createSmartSource(tenantId, body),
  }),
  defineOperation({
    id: 'listSmartSources',
    method: 'GET',
    path: '/api/v1/smart-sources',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'List smart sources',
    description: 'Lists the smart sources of the workspace, newest first, one page at a time.',
    query: ListQuery,
    response: ListOf(SmartSourceRecord),
    handler: ({ tenantId, query, services }) => services.smartSources.listSmartSources(tenantId, query),
  }),
  defineOperation({
    id: 'getSmartSource',
    method: 'GET',
    path: '/api/v1/smart-sources/:smart_source_id',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'Get a smart source',
    description: 'Returns one smart source with the data source it writes into and the tag it puts on rows.',
    params: Params,
    response: SmartSourceRecord,
    handler: ({ tenantId, params, services }) => services.smartSources.getSmartSource(tenantId, params.smart_source_id),
  }),
  defineOperation({
    id: 'deleteSmartSource',
    method: 'DELETE',
    path: '/api/v1/smart-sources/:smart_source_id',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Delete a smart source',
    description:
      'Deletes a smart source. The rows it ingested stay in their data sources: purge them first if they ' +
      'should go too.',
    params: Params,
    response: Deleted,
    destructive: true,
    idempotent: true,
    handler: ({ tenantId, params, services }) =>
      services.smartSources.deleteSmartSource(tenantId, params.smart_source_id),
  }),
  defineOperation({
    id: 'ingestSmartSourceRows',
    method: 'POST',
    path: '/api/v1/smart-sources/:smart_source_id/ingest',
    scope: 'knowledge:write',
    largeBody: true,
    tag: TAG,
    summary: 'Ingest rows through a smart source',
    description:
      'Writes 1 to 100 rows into the smart source’s custom data source, each created or replaced whole by ' +
      '`external_id` and tagged `smart-source:<id>` besides its own tags; all or none. Answers 409 conflict ' +
      'when the data source was deleted. Returns the counts and the written rows.',
    params: Params,
    body: RowsBody,
    response: RowsUpserted,
    errors: ['missing_required_parameter', 'too_many_items', 'empty_items', 'conflict'],
    idempotent: true,
    handler: ({ tenantId, params, body, services }) =>
      services.smartSources.ingest(tenantId, params.smart_source_id, body.rows),
  }),
  defineOperation({
    id: 'purgeSmartSourceRows',
    method: 'POST',
    path: '/api/v1/smart-sources/:smart_source_id/purge-rows',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Purge every row a smart source ingested',
    description:
      'Deletes every row carrying the tag `smart-source:<id>`, in every custom data source of the workspace, ' +
      'in one transaction; rows without the tag are left alone. Returns how many rows were deleted.',
    params: Params,
    response: Type.Object({ object: Type.Literal('purge'), deleted_count: Type.Integer() }, { title: 'Purge' }),
    destructive: true,
    idempotent: true,
    handler: ({ tenantId, params, services }) => services.smartSources.purgeRows(tenantId, params.smart_source_id),
  }),
];
