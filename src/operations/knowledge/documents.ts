// Documents (scope `knowledge`): create, list (`q` ranks by full-text search), get, delete, bulk
// delete (spec: product updates), and translations (spec: Add Translation; one per language).
import { Type } from '@sinclair/typebox';
import {
  DocumentRecord,
  MAX_CONTENT_LENGTH,
  MAX_PAGE_ID_LENGTH,
  TranslationRecord,
} from '../../domain/knowledge/documents.js';
import { Deleted, ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const Language = Type.String({
  minLength: 2,
  maxLength: 35,
  pattern: '^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$',
  description: 'A language tag (`en`, `fr`, `pt-BR`); stored lower-case.',
});

const BulkDeleteResult = Type.Object(
  { object: Type.Literal('bulk_delete'), deleted_count: Type.Integer() },
  { title: 'BulkDeleteResult' },
);

const Title = Type.String({ minLength: 1, maxLength: 500 });
const Content = Type.String({ minLength: 1, maxLength: MAX_CONTENT_LENGTH });
const DocumentParams = Type.Object({ document_id: Uuid });

export const documentOperations = [
  defineOperation({
    id: 'createDocument',
    method: 'POST',
    path: '/api/v1/documents',
    scope: 'knowledge:write',
    largeBody: true,
    tag: 'Documents',
    summary: 'Create a document',
    description:
      'Adds a document to the knowledge the agent answers from. `source_id` (optional) must name a manual ' +
      'source; `page_id` (with `source_id`) is unique within it. `language` defaults to `en` and selects the ' +
      'full-text search configuration. Returns the document.',
    body: Type.Object(
      {
        title: Title,
        content: Content,
        language: Type.Optional(Language),
        source_id: Type.Optional(Uuid),
        page_id: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_PAGE_ID_LENGTH })),
      },
      { additionalProperties: false },
    ),
    response: DocumentRecord,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters', 'conflict'],
    handler: ({ tenantId, body, services }) => services.documents.create(tenantId, body),
  }),
  defineOperation({
    id: 'listDocuments',
    method: 'GET',
    path: '/api/v1/documents',
    scope: 'knowledge:read',
    tag: 'Documents',
    summary: 'List or search documents',
    description:
      "Lists documents, newest first; `source_id` keeps one source's. With `q`, only documents whose text or " +
      'a translation matches are listed, best first, each with `rank` and `snippet`. `q` uses web-search ' +
      'syntax: words must all match, `"quoted phrase"`, `or`, `-excluded`.',
    query: Type.Object(
      {
        ...ListQuery.properties,
        source_id: Type.Optional(Uuid),
        q: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'Full-text search.' })),
      },
      { additionalProperties: false },
    ),
    response: ListOf(DocumentRecord),
    handler: ({ tenantId, query, services }) => services.documents.list(tenantId, query),
  }),
  defineOperation({
    id: 'getDocument',
    method: 'GET',
    path: '/api/v1/documents/:document_id',
    scope: 'knowledge:read',
    tag: 'Documents',
    summary: 'Get a document',
    description: 'Returns one document with its content.',
    params: DocumentParams,
    response: DocumentRecord,
    handler: ({ tenantId, params, services }) => services.documents.get(tenantId, params.document_id),
  }),
  defineOperation({
    id: 'deleteDocument',
    method: 'DELETE',
    path: '/api/v1/documents/:document_id',
    scope: 'knowledge:write',
    tag: 'Documents',
    summary: 'Delete a document',
    description:
      'Deletes a document and its translations. A page of a website source comes back at its next sync if ' +
      'the site still has it.',
    params: DocumentParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.documents.delete(tenantId, params.document_id),
  }),
  defineOperation({
    id: 'bulkDeleteDocuments',
    method: 'POST',
    path: '/api/v1/documents/bulk-delete',
    scope: 'knowledge:write',
    tag: 'Documents',
    summary: 'Delete documents in bulk',
    description:
      'Deletes up to 100 documents at once, all or nothing: either `document_ids`, or `source_id` with ' +
      '`page_ids` (not both: `ambiguous_addressing`). Ids and pages that name no document are not counted; ' +
      '`deleted_count` says how many were deleted.',
    body: Type.Object(
      {
        document_ids: Type.Optional(Type.Array(Uuid)),
        source_id: Type.Optional(Uuid),
        page_ids: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: MAX_PAGE_ID_LENGTH }))),
      },
      { additionalProperties: false },
    ),
    response: BulkDeleteResult,
    destructive: true,
    errors: [
      'missing_required_parameter',
      'invalid_parameters',
      'ambiguous_addressing',
      'too_many_items',
      'empty_items',
    ],
    handler: ({ tenantId, body, services }) => services.documents.bulkDelete(tenantId, body ?? {}),
  }),
  defineOperation({
    id: 'addDocumentTranslation',
    method: 'POST',
    path: '/api/v1/documents/:document_id/translations',
    scope: 'knowledge:write',
    largeBody: true,
    tag: 'Documents',
    summary: 'Add a translation to a document',
    description:
      'Adds the document in another language; the agent answers from it in conversations in that language, ' +
      "and search covers it with that language's configuration. One translation per language (a second, or " +
      "the document's own language, is a 409 conflict). Returns the translation.",
    params: DocumentParams,
    body: Type.Object(
      {
        language: Language,
        title: Title,
        content: Content,
        related_questions: Type.Optional(
          Type.String({ maxLength: 100_000, description: 'Questions the translation answers, as text.' }),
        ),
      },
      { additionalProperties: false },
    ),
    response: TranslationRecord,
    status: 201,
    errors: ['missing_required_parameter', 'conflict'],
    handler: ({ tenantId, params, body, services }) =>
      services.documents.addTranslation(tenantId, params.document_id, body),
  }),
  defineOperation({
    id: 'listDocumentTranslations',
    method: 'GET',
    path: '/api/v1/documents/:document_id/translations',
    scope: 'knowledge:read',
    tag: 'Documents',
    summary: 'List the translations of a document',
    description: 'Lists the translations of a document, newest first.',
    params: DocumentParams,
    query: ListQuery,
    response: ListOf(TranslationRecord),
    handler: ({ tenantId, params, query, services }) =>
      services.documents.listTranslations(tenantId, params.document_id, query),
  }),
];
