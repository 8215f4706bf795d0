// Knowledge update requests, or knowledge gaps (scope `knowledge`): questions the agent could not
// answer. List, get, review, resolve, apply (DESIGN.md §7; spec: product updates, over MCP too).
// Transitions are in src/domain/knowledge/gaps.ts; an illegal one answers 409 `conflict`.
import { Type } from '@sinclair/typebox';
import { KnowledgeUpdateRequestRecord, RequestStatus } from '../../domain/knowledge/gaps-records.js';
import { ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const Params = Type.Object({ knowledge_update_request_id: Uuid });
const Answer = Type.String({ minLength: 1, maxLength: 100_000 });
const TAG = 'Knowledge update requests';

export const knowledgeGapOperations = [
  defineOperation({
    id: 'listKnowledgeUpdateRequests',
    method: 'GET',
    path: '/api/v1/knowledge-update-requests',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'List knowledge update requests',
    description:
      'Lists knowledge gaps — questions the agent could not answer from the knowledge — newest first; ' +
      '`status` keeps one status (`open` for the ones waiting for review).',
    query: Type.Object(
      { ...ListQuery.properties, status: Type.Optional(RequestStatus) },
      { additionalProperties: false },
    ),
    response: ListOf(KnowledgeUpdateRequestRecord),
    handler: ({ tenantId, query, services }) => services.knowledgeGaps.list(tenantId, query),
  }),
  defineOperation({
    id: 'getKnowledgeUpdateRequest',
    method: 'GET',
    path: '/api/v1/knowledge-update-requests/:knowledge_update_request_id',
    scope: 'knowledge:read',
    tag: TAG,
    summary: 'Get a knowledge update request',
    description: 'Returns one knowledge update request with its question, status, review and proposed answer.',
    params: Params,
    response: KnowledgeUpdateRequestRecord,
    handler: ({ tenantId, params, services }) =>
      services.knowledgeGaps.get(tenantId, params.knowledge_update_request_id),
  }),
  defineOperation({
    id: 'reviewKnowledgeUpdateRequest',
    method: 'POST',
    writes: 'update',
    path: '/api/v1/knowledge-update-requests/:knowledge_update_request_id/review',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Review a knowledge update request',
    description:
      'Approves or rejects an open request, with an optional note; `proposed_answer` sets the answer to apply. ' +
      'Only an `open` request can be reviewed (otherwise 409 conflict). Returns the request.',
    params: Params,
    body: Type.Object(
      {
        decision: Type.Union([Type.Literal('approve'), Type.Literal('reject')]),
        note: Type.Optional(Type.String({ maxLength: 10_000 })),
        proposed_answer: Type.Optional(Answer),
      },
      { additionalProperties: false },
    ),
    response: KnowledgeUpdateRequestRecord,
    errors: ['missing_required_parameter', 'conflict'],
    handler: ({ tenantId, params, body, services }) =>
      services.knowledgeGaps.review(tenantId, params.knowledge_update_request_id, body),
  }),
  defineOperation({
    id: 'resolveKnowledgeUpdateRequest',
    method: 'POST',
    writes: 'update',
    path: '/api/v1/knowledge-update-requests/:knowledge_update_request_id/resolve',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Mark a knowledge update request resolved',
    description:
      'Closes an `open`, `approved` or `rejected` request without writing anything (the gap was handled ' +
      'another way). An `applied` or `resolved` request answers 409 conflict. Returns the request.',
    params: Params,
    response: KnowledgeUpdateRequestRecord,
    errors: ['conflict'],
    handler: ({ tenantId, params, services }) =>
      services.knowledgeGaps.resolve(tenantId, params.knowledge_update_request_id),
  }),
  defineOperation({
    id: 'applyKnowledgeUpdateRequest',
    method: 'POST',
    writes: 'update',
    path: '/api/v1/knowledge-update-requests/:knowledge_update_request_id/apply',
    scope: 'knowledge:write',
    tag: TAG,
    summary: 'Apply a knowledge update request',
    description:
      'Writes the proposed answer of an `approved` request into the knowledge and marks it `applied`: appended ' +
      'to `document_id` (sent, or set on the request) as a section headed by the question, or as a new ' +
      'document titled with the question (or `title`). `proposed_answer` sent here replaces the stored one. ' +
      'Returns the request with its `document_id`.',
    params: Params,
    body: Type.Object(
      {
        proposed_answer: Type.Optional(Answer),
        document_id: Type.Optional(Uuid),
        title: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
        language: Type.Optional(
          Type.String({ minLength: 2, maxLength: 35, pattern: '^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$' }),
        ),
      },
      { additionalProperties: false },
    ),
    response: KnowledgeUpdateRequestRecord,
    errors: ['missing_required_parameter', 'invalid_parameters', 'conflict'],
    handler: ({ tenantId, params, body, services }) =>
      services.knowledgeGaps.apply(tenantId, params.knowledge_update_request_id, body ?? {}),
  }),
];
