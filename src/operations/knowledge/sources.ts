// Sources (scope `knowledge`): create, list, get, update (spec: Update SourceRecord), delete, and sync
// (spec: Sync Source → 202 with the `sync` acknowledgement; the sync runs on the job queue).
import { Type } from '@sinclair/typebox';
import { SourceRecord, SourceType, SyncAcknowledgement } from '../../domain/knowledge/sources.js';
import { Deleted, ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const Name = Type.String({ minLength: 1, maxLength: 200 });
const Domain = Type.String({
  minLength: 1,
  maxLength: 2000,
  description: 'A host (`docs.example.com`) or the URL to start from (`https://example.com/help`).',
});
const ExternalId = Type.String({ minLength: 1, maxLength: 200, description: 'Your own identifier for the source.' });
const AdditionalInfo = Type.Record(Type.String(), Type.Unknown(), {
  description: 'Free-form data kept with the source.',
});

const SourceParams = Type.Object({ source_id: Uuid });

export const sourceOperations = [
  defineOperation({
    id: 'createSource',
    method: 'POST',
    path: '/api/v1/sources',
    scope: 'knowledge:write',
    tag: 'Sources',
    summary: 'Create a source',
    description:
      'Creates a knowledge source: `website` (needs `domain`; its sync crawls the site into documents) or ' +
      '`manual` (documents are created through the API). Nothing is crawled until a sync is requested or ' +
      'auto-sync is due. Returns the source with `sync_status` `never_synced`.',
    body: Type.Object(
      {
        name: Name,
        source_type: SourceType,
        domain: Type.Optional(Domain),
        source_id: Type.Optional(ExternalId),
        additional_info: Type.Optional(AdditionalInfo),
        auto_sync_enabled: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
    response: SourceRecord,
    status: 201,
    errors: ['missing_required_parameter'],
    handler: ({ tenantId, body, services }) => services.sources.create(tenantId, body),
  }),
  defineOperation({
    id: 'listSources',
    method: 'GET',
    path: '/api/v1/sources',
    scope: 'knowledge:read',
    tag: 'Sources',
    summary: 'List sources',
    description: 'Lists the knowledge sources, newest first, with their sync status and document count.',
    query: ListQuery,
    response: ListOf(SourceRecord),
    handler: ({ tenantId, query, services }) => services.sources.list(tenantId, query),
  }),
  defineOperation({
    id: 'getSource',
    method: 'GET',
    path: '/api/v1/sources/:source_id',
    scope: 'knowledge:read',
    tag: 'Sources',
    summary: 'Get a source',
    description: 'Returns one source; poll it to follow a sync (`sync_status`, `sync_error`, `last_synced_at`).',
    params: SourceParams,
    response: SourceRecord,
    handler: ({ tenantId, params, services }) => services.sources.get(tenantId, params.source_id),
  }),
  defineOperation({
    id: 'updateSource',
    method: 'PUT',
    path: '/api/v1/sources/:source_id',
    scope: 'knowledge:write',
    tag: 'Sources',
    summary: 'Update a source',
    description:
      'Updates a knowledge source and returns the source record. Only the fields sent change: `name`, ' +
      '`source_id`, `domain`, `additional_info`, `auto_sync_enabled`. A new domain is crawled at the next sync, ' +
      'or by the running one: a sync writes its result only while the source names the domain it crawled.',
    params: SourceParams,
    body: Type.Object(
      {
        name: Type.Optional(Name),
        source_id: Type.Optional(ExternalId),
        domain: Type.Optional(Domain),
        additional_info: Type.Optional(AdditionalInfo),
        auto_sync_enabled: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
    response: SourceRecord,
    idempotent: true,
    handler: ({ tenantId, params, body, services }) => services.sources.update(tenantId, params.source_id, body ?? {}),
  }),
  defineOperation({
    id: 'deleteSource',
    method: 'DELETE',
    path: '/api/v1/sources/:source_id',
    scope: 'knowledge:write',
    tag: 'Sources',
    summary: 'Delete a source',
    description: 'Deletes a source together with all its documents and their translations. This cannot be undone.',
    params: SourceParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.sources.delete(tenantId, params.source_id),
  }),
  defineOperation({
    id: 'syncSource',
    method: 'POST',
    path: '/api/v1/sources/:source_id/sync',
    scope: 'knowledge:write',
    tag: 'Sources',
    summary: 'Sync a source',
    description:
      'Triggers a sync of a knowledge source and answers 202 at once: a website source is crawled again ' +
      '(new and changed pages written, pages gone removed), a manual source is re-indexed. While a sync is ' +
      'queued or running, another request joins it and answers its status; a running sync crawls a domain ' +
      'changed during its crawl in turn, and one that has already written its result runs once more after it ' +
      'ends. Follow it with Get Source.',
    params: SourceParams,
    response: SyncAcknowledgement,
    status: 202,
    idempotent: true,
    handler: ({ tenantId, params, services }) => services.sources.requestSync(tenantId, params.source_id),
  }),
];
