// Custom data sources (scope `knowledge`, DESIGN.md §7): create, list, get, delete a source; upsert,
// batch-upsert, get, delete, list/search and clear its rows. Spec: the custom data source row
// record; rules 7 (Clear Rows keeps the schema) and 8 (Delete drops the backing table).
import { type Static, Type } from '@sinclair/typebox';
import {
  DataSourceRecord,
  FieldDeclaration,
  MAX_EXTERNAL_ID_LENGTH,
  MAX_ROW_TAGS,
  RowData,
  RowRecord,
  RowsUpserted,
  SLUG_PATTERN,
} from '../../domain/data/custom-data-sources.js';
import { Deleted, ListOf, ListQuery, PathName } from '../../domain/shapes.js';
import { defineOperation, withStatus } from '../registry.js';

const TAG = 'Custom data sources';

const Slug = Type.String({
  pattern: SLUG_PATTERN,
  description:
    'Lowercase letters, digits, `_` and `-`, starting with a letter or digit, at most 63 characters; ' +
    'unique in the workspace, and not in the form of a UUID.',
});

const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  maxItems: MAX_ROW_TAGS,
  description: 'Labels to filter rows by (`tag` in list). Duplicates are dropped.',
});

const RowFields = {
  data: RowData,
  tags: Type.Optional(Tags),
  searchable_text: Type.Optional(
    Type.String({ description: 'Text that full-text search (`q`) matches, ranked above `content`. Default "".' }),
  ),
  content: Type.Optional(Type.String({ description: 'Longer text, also searched by `q`. Default "".' })),
};

const ExternalId = Type.String({
  minLength: 1,
  maxLength: MAX_EXTERNAL_ID_LENGTH,
  description: `Your key for the row, 1 to ${MAX_EXTERNAL_ID_LENGTH} characters, no control characters; URL-encode it in paths (\`a/b\` → \`a%2Fb\`).`,
});

export const BatchRow = Type.Object({ external_id: ExternalId, ...RowFields }, { additionalProperties: false });

export const RowsBody = Type.Object(
  { rows: Type.Array(BatchRow, { description: '1 to 100 rows with distinct `external_id`s.' }) },
  { additionalProperties: false },
);

const SourceParams = Type.Object({
  id_or_slug: PathName({ maxLength: 100, description: 'The source id (a UUID) or its slug.' }),
});
const RowParams = Type.Object({ ...SourceParams.properties, external_id: ExternalId });

export const customDataSourceOperations = [
  defineOperation({
    id: 'createCustomDataSource',
    method: 'POST',
    path: '/api/v1/custom-data-sources',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Create a custom data source',
    description:
      'Creates a table of rows the agent can look things up in (orders, plans, stores), with its own backing ' +
      'table. `slug` is unique in the workspace and can be used instead of the id in paths. Optional `fields` ' +
      'declare keys of row `data` with a type and whether they are required; rows are checked against them. ' +
      'A workspace holds at most CUSTOM_DATA_SOURCES_MAX sources (100 by default): one more is a 409 conflict. ' +
      'Returns the source.',
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 200 }),
        slug: Slug,
        fields: Type.Optional(Type.Array(FieldDeclaration, { maxItems: 100 })),
      },
      { additionalProperties: false },
    ),
    response: DataSourceRecord,
    status: 201,
    errors: ['missing_required_parameter', 'conflict'],
    handler: ({ tenantId, body, services }) => services.customDataSources.createSource(tenantId, body),
  }),
  defineOperation({
    id: 'listCustomDataSources',
    method: 'GET',
    path: '/api/v1/custom-data-sources',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'List custom data sources',
    description: 'Lists the custom data sources of the workspace, newest first, one page at a time.',
    query: ListQuery,
    response: ListOf(DataSourceRecord),
    handler: ({ tenantId, query, services }) => services.customDataSources.listSources(tenantId, query),
  }),
  defineOperation({
    id: 'getCustomDataSource',
    method: 'GET',
    path: '/api/v1/custom-data-sources/:id_or_slug',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'Get a custom data source',
    description: 'Returns one custom data source, by id or slug, with its declared fields.',
    params: SourceParams,
    response: DataSourceRecord,
    handler: ({ tenantId, params, services }) => services.customDataSources.getSource(tenantId, params.id_or_slug),
  }),
  defineOperation({
    id: 'deleteCustomDataSource',
    method: 'DELETE',
    path: '/api/v1/custom-data-sources/:id_or_slug',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Delete a custom data source',
    description:
      'Deletes a custom data source: drops its backing table with every row, and its metadata, at once. ' +
      'Smart sources writing into it remain but can no longer ingest. This cannot be undone. ' +
      'To empty a source but keep it, use clear rows instead.',
    params: SourceParams,
    response: Deleted,
    destructive: true,
    idempotent: true,
    handler: ({ tenantId, params, services }) => services.customDataSources.deleteSource(tenantId, params.id_or_slug),
  }),
  defineOperation({
    id: 'upsertCustomDataSourceRow',
    method: 'PUT',
    path: '/api/v1/custom-data-sources/:id_or_slug/rows/:external_id',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Create or replace a row',
    description:
      'Writes the row with this `external_id`: creates it (201) or replaces it whole (200); omitted `tags`, ' +
      '`searchable_text` and `content` become empty. Use it to keep one record in sync with your system. ' +
      'Returns the row.',
    params: RowParams,
    body: Type.Object(RowFields, { additionalProperties: false }),
    response: RowRecord,
    alsoStatus: [201],
    errors: ['missing_required_parameter'],
    idempotent: true,
    handler: async ({ tenantId, params, body, services }) => {
      const { record, created } = await services.customDataSources.upsertRow(
        tenantId,
        params.id_or_slug,
        params.external_id,
        body,
      );
      return created ? withStatus(201, record) : record;
    },
  }),
  defineOperation({
    id: 'upsertCustomDataSourceRows',
    method: 'POST',
    path: '/api/v1/custom-data-sources/:id_or_slug/rows/batch',
    scope: 'knowledge:write',
    largeBody: true,
    tag: TAG,
    summary: 'Create or replace up to 100 rows',
    description:
      'Writes 1 to 100 rows, each created or replaced whole by `external_id`, all or none: if one row is ' +
      'invalid, nothing is written and `param` names it (`rows[3].data.price`). Returns the counts of created ' +
      'and updated rows and the rows, in request order.',
    params: SourceParams,
    body: RowsBody,
    response: RowsUpserted,
    errors: ['missing_required_parameter', 'too_many_items', 'empty_items'],
    idempotent: true,
    handler: ({ tenantId, params, body, services }) =>
      services.customDataSources.upsertRows(tenantId, params.id_or_slug, body.rows),
  }),
  defineOperation({
    id: 'listCustomDataSourceRows',
    method: 'GET',
    path: '/api/v1/custom-data-sources/:id_or_slug/rows',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'List or search rows',
    description:
      'Lists the rows of a source, newest first; `tag` keeps rows carrying that tag. With `q`, only rows ' +
      'whose `searchable_text` or `content` match are listed, best match first, each with its `score`; ' +
      '`q` takes web-search syntax (words, "quoted phrases", `or`, `-excluded`). Use it to look up records.',
    params: SourceParams,
    query: Type.Object(
      {
        ...ListQuery.properties,
        q: Type.Optional(Type.String({ minLength: 1, maxLength: 1000, description: 'Full-text query.' })),
        tag: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Only rows with this tag.' })),
      },
      { additionalProperties: false },
    ),
    response: ListOf(RowRecord),
    handler: ({ tenantId, params, query, services }) =>
      services.customDataSources.listRows(tenantId, params.id_or_slug, query),
  }),
  defineOperation({
    id: 'getCustomDataSourceRow',
    method: 'GET',
    path: '/api/v1/custom-data-sources/:id_or_slug/rows/:external_id',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'Get a row',
    description: 'Returns the row with this `external_id` (URL-encoded in the path); `score` is null.',
    params: RowParams,
    response: RowRecord,
    handler: ({ tenantId, params, services }) =>
      services.customDataSources.getRow(tenantId, params.id_or_slug, params.external_id),
  }),
  defineOperation({
    id: 'deleteCustomDataSourceRow',
    method: 'DELETE',
    path: '/api/v1/custom-data-sources/:id_or_slug/rows/:external_id',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Delete a row',
    description: 'Deletes the row with this `external_id`. Returns the deleted acknowledgement with the row id.',
    params: RowParams,
    response: Deleted,
    destructive: true,
    idempotent: true,
    handler: ({ tenantId, params, services }) =>
      services.customDataSources.deleteRow(tenantId, params.id_or_slug, params.external_id),
  }),
  defineOperation({
    id: 'clearCustomDataSourceRows',
    method: 'POST',
    path: '/api/v1/custom-data-sources/:id_or_slug/rows/clear',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Clear every row',
    description:
      'Deletes every row of the source at once and keeps the source, its table and its declared fields, so ' +
      'new rows can be written right away. Use it before a full reload. Returns how many rows were deleted.',
    params: SourceParams,
    response: Type.Object(
      { object: Type.Literal('rows_cleared'), deleted_count: Type.Integer() },
      { title: 'RowsCleared' },
    ),
    destructive: true,
    idempotent: true,
    handler: ({ tenantId, params, services }) => services.customDataSources.clearRows(tenantId, params.id_or_slug),
  }),
];

export type BatchRowBody = Static<typeof BatchRow>;
