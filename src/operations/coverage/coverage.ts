// Knowledge coverage (scope `coverage`, DESIGN.md §7): referentials and their reference
// questions, domain renames (spec, behaviour rule 6), evaluation runs and the latest coverage,
// question extraction from conversations and its live progress.

import { Type } from '@sinclair/typebox';
import { MAX_DOMAIN_LENGTH } from '../../domain/coverage/referentials.js';
import { Deleted, ListOf, ListQuery, Nullable, Timestamp, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const StringEnum = <const T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });

const RunStatus = StringEnum(['queued', 'running', 'completed', 'failed']);
const Domain = Type.String({
  minLength: 1,
  maxLength: MAX_DOMAIN_LENGTH,
  description: 'A domain name, compared exactly.',
});

const Referential = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('coverage_referential'),
    name: Type.String(),
    question_count: Type.Integer(),
    domain_count: Type.Integer(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'CoverageReferential' },
);

const Question = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('coverage_question'),
    referential_id: Uuid,
    question: Type.String(),
    domain: Type.String(),
    origin: StringEnum(['manual', 'extracted'], 'manual: added through the API; extracted: found in a conversation.'),
    conversation_id: Nullable(Uuid),
    created_at: Timestamp,
  },
  { title: 'CoverageQuestion' },
);

const DomainCount = Type.Object({ domain: Type.String(), question_count: Type.Integer() });

const QuestionList = Type.Composite(
  [
    ListOf(Question),
    Type.Object({
      referential_id: Uuid,
      domains: Type.Array(DomainCount, { description: 'Every domain of the referential, by name.' }),
    }),
  ],
  { title: 'CoverageQuestionList' },
);

const DomainRename = Type.Object(
  {
    object: Type.Literal('domain_rename'),
    referential_id: Uuid,
    old_domain: Type.String(),
    new_domain: Type.String(),
    renamed_count: Type.Integer({ description: 'Questions moved from old_domain to new_domain.' }),
    merged: Type.Boolean({ description: 'True when new_domain already existed: the two domains are now one.' }),
  },
  { title: 'DomainRename' },
);

const DomainResult = Type.Object({
  domain: Type.String(),
  covered: Type.Integer(),
  total: Type.Integer(),
  percentage: Nullable(Type.Number({ description: 'covered / total × 100, one decimal.' })),
});

const Method = StringEnum(
  ['rank_threshold', 'llm_judge'],
  'rank_threshold: covered when retrieval finds a passage at or above the threshold. llm_judge: the configured model also confirms the passages answer it.',
);

const Evaluation = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('coverage_evaluation'),
    referential_id: Uuid,
    status: RunStatus,
    method: Method,
    threshold: Type.Number({ description: 'The rank threshold of the agent retrieval used.' }),
    processed: Type.Integer({ description: 'Questions judged so far.' }),
    covered: Type.Integer(),
    total: Type.Integer(),
    percentage: Nullable(Type.Number({ description: 'Once completed: covered / total × 100, one decimal.' })),
    domains: Type.Array(DomainResult, { description: 'Once completed: results per domain, by name.' }),
    error: Nullable(Type.String()),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
  },
  { title: 'CoverageEvaluation' },
);

const Result = Type.Object(
  {
    object: Type.Literal('coverage_result'),
    question_id: Uuid,
    question: Type.String(),
    domain: Type.String(),
    covered: Type.Boolean(),
    best_rank: Nullable(Type.Number({ description: 'Rank of the best passage retrieval found, if any.' })),
    document_id: Nullable(Uuid),
  },
  { title: 'CoverageResult' },
);

const Coverage = Type.Object(
  {
    object: Type.Literal('coverage'),
    has_evaluation: Type.Boolean({ description: 'False until an evaluation has completed; the lists are then empty.' }),
    evaluation_id: Nullable(Uuid),
    referential_id: Nullable(Uuid),
    completed_at: Nullable(Timestamp),
    method: Nullable(Method),
    domains: Type.Array(DomainResult),
    overall: Nullable(
      Type.Object({ covered: Type.Integer(), total: Type.Integer(), percentage: Nullable(Type.Number()) }),
    ),
  },
  { title: 'Coverage' },
);

const Extraction = Type.Object(
  {
    object: Type.Literal('question_extraction'),
    id: Nullable(Uuid),
    referential_id: Nullable(Uuid),
    status: StringEnum(
      ['never_run', 'queued', 'running', 'completed', 'failed'],
      'never_run: the workspace has no extraction yet.',
    ),
    total_conversations: Type.Integer({ description: 'Conversations started before the run was requested.' }),
    processed_conversations: Type.Integer(),
    questions_found: Type.Integer({ description: 'Customer questions read, before near-duplicates are dropped.' }),
    questions_added: Type.Integer({ description: 'Questions added to the referential.' }),
    percent: Type.Number({ description: 'processed / total × 100, one decimal; 100 once completed.' }),
    error: Nullable(Type.String()),
    created_at: Nullable(Timestamp),
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
  },
  { title: 'QuestionExtraction' },
);

const ReferentialParams = Type.Object({ referential_id: Uuid });
const ReferentialBody = Type.Object({ referential_id: Uuid }, { additionalProperties: false });
const TAG = 'Coverage';

export const coverageOperations = [
  defineOperation({
    id: 'createReferential',
    method: 'POST',
    path: '/api/v1/coverage/referentials',
    scope: 'coverage:write',
    tag: TAG,
    summary: 'Create a coverage referential',
    description:
      'Creates an empty referential: a named set of reference questions, each filed under a domain, against which ' +
      'knowledge coverage is measured. The name is unique in the workspace.',
    body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
    response: Referential,
    status: 201,
    errors: ['missing_required_parameter', 'conflict'],
    handler: ({ tenantId, body, services }) => services.coverage.createReferential(tenantId, body),
  }),
  defineOperation({
    id: 'listReferentials',
    method: 'GET',
    path: '/api/v1/coverage/referentials',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'List coverage referentials',
    description: 'Lists the referentials of the workspace, newest first, with their question and domain counts.',
    query: ListQuery,
    response: ListOf(Referential),
    handler: ({ tenantId, query, services }) => services.coverage.listReferentials(tenantId, query),
  }),
  defineOperation({
    id: 'getReferential',
    method: 'GET',
    path: '/api/v1/coverage/referentials/:referential_id',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'Get a coverage referential',
    description: 'Returns one referential with its question and domain counts.',
    params: ReferentialParams,
    response: Referential,
    handler: ({ tenantId, params, services }) => services.coverage.getReferential(tenantId, params.referential_id),
  }),
  defineOperation({
    id: 'deleteReferential',
    method: 'DELETE',
    path: '/api/v1/coverage/referentials/:referential_id',
    scope: 'coverage:write',
    tag: TAG,
    summary: 'Delete a coverage referential',
    description: 'Deletes a referential with its questions, evaluations and extraction runs. This cannot be undone.',
    params: ReferentialParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.coverage.deleteReferential(tenantId, params.referential_id),
  }),
  defineOperation({
    id: 'addReferentialQuestions',
    method: 'POST',
    path: '/api/v1/coverage/referentials/:referential_id/questions',
    scope: 'coverage:write',
    tag: TAG,
    summary: 'Add reference questions',
    description:
      'Adds 1 to 100 reference questions to a referential, each with its domain (a new domain comes into being with ' +
      'its first question). Returns the questions added, in the order sent.',
    params: ReferentialParams,
    body: Type.Object(
      {
        questions: Type.Array(
          Type.Object(
            { question: Type.String({ minLength: 1, maxLength: 2000 }), domain: Domain },
            { additionalProperties: false },
          ),
          { description: '1 to 100 questions (more is `too_many_items`, none is `empty_items`).' },
        ),
      },
      { additionalProperties: false },
    ),
    response: ListOf(Question),
    status: 201,
    errors: ['missing_required_parameter', 'too_many_items', 'empty_items'],
    handler: ({ tenantId, params, body, services }) =>
      services.coverage.addQuestions(tenantId, params.referential_id, body.questions),
  }),
  defineOperation({
    id: 'listReferentialQuestions',
    method: 'GET',
    path: '/api/v1/coverage/referentials/:referential_id/questions',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'List the questions of a referential',
    description:
      'Lists the reference questions of a referential with their ids, newest first (optionally of one `domain`), ' +
      'plus every domain of the referential with its question count.',
    params: ReferentialParams,
    query: Type.Composite([ListQuery, Type.Object({ domain: Type.Optional(Domain) })], {
      additionalProperties: false,
    }),
    response: QuestionList,
    handler: ({ tenantId, params, query, services }) =>
      services.coverage.listQuestions(tenantId, params.referential_id, query),
  }),
  defineOperation({
    id: 'renameReferentialDomain',
    method: 'PUT',
    path: '/api/v1/coverage/referentials/:referential_id/domains/rename',
    scope: 'coverage:write',
    tag: TAG,
    summary: 'Rename a domain of a referential',
    description:
      'Renames `old_domain` to `new_domain` on every question of the referential, in one transaction, and returns ' +
      'how many questions changed. Renaming onto an existing domain merges the two (`merged: true`). An ' +
      '`old_domain` no question carries is `invalid_parameters`.',
    params: ReferentialParams,
    body: Type.Object({ old_domain: Domain, new_domain: Domain }, { additionalProperties: false }),
    response: DomainRename,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    idempotent: false,
    handler: ({ tenantId, params, body, services }) =>
      services.coverage.renameDomain(tenantId, params.referential_id, body),
  }),
  defineOperation({
    id: 'startCoverageEvaluation',
    method: 'POST',
    path: '/api/v1/coverage/evaluations',
    scope: 'coverage:write',
    tag: TAG,
    summary: 'Start a coverage evaluation',
    description:
      "Queues a run that puts every question of the referential to the agent's retrieval and records whether the " +
      'knowledge answers it. Answers 202 with the run (status `queued`); follow it with Get coverage evaluation.',
    body: ReferentialBody,
    response: Evaluation,
    status: 202,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: ({ tenantId, body, services }) => services.coverage.startEvaluation(tenantId, body),
  }),
  defineOperation({
    id: 'listCoverageEvaluations',
    method: 'GET',
    path: '/api/v1/coverage/evaluations',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'List coverage evaluations',
    description: 'Lists the evaluation runs of the workspace, newest first.',
    query: ListQuery,
    response: ListOf(Evaluation),
    handler: ({ tenantId, query, services }) => services.coverage.listEvaluations(tenantId, query),
  }),
  defineOperation({
    id: 'getCoverageEvaluation',
    method: 'GET',
    path: '/api/v1/coverage/evaluations/:evaluation_id',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'Get a coverage evaluation',
    description: 'Returns one evaluation run: its status, progress, counts and, once completed, per-domain results.',
    params: Type.Object({ evaluation_id: Uuid }),
    response: Evaluation,
    handler: ({ tenantId, params, services }) => services.coverage.getEvaluation(tenantId, params.evaluation_id),
  }),
  defineOperation({
    id: 'listCoverageEvaluationResults',
    method: 'GET',
    path: '/api/v1/coverage/evaluations/:evaluation_id/results',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'List the per-question results of an evaluation',
    description:
      'Lists each judged question of a run with whether it is covered and the best passage found; `covered=false` ' +
      'lists the questions the knowledge does not answer.',
    params: Type.Object({ evaluation_id: Uuid }),
    query: Type.Composite([ListQuery, Type.Object({ covered: Type.Optional(Type.Boolean()) })], {
      additionalProperties: false,
    }),
    response: ListOf(Result),
    handler: ({ tenantId, params, query, services }) =>
      services.coverage.listResults(tenantId, params.evaluation_id, query),
  }),
  defineOperation({
    id: 'getCoverage',
    method: 'GET',
    path: '/api/v1/coverage',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'Get knowledge coverage',
    description:
      'Per-domain coverage percentages from the latest completed evaluation of the workspace (or of `referential_id`). ' +
      'Before any evaluation has completed: `has_evaluation: false` and an empty list.',
    query: Type.Object({ referential_id: Type.Optional(Uuid) }, { additionalProperties: false }),
    response: Coverage,
    handler: ({ tenantId, query, services }) => services.coverage.latestCoverage(tenantId, query),
  }),
  defineOperation({
    id: 'startQuestionExtraction',
    method: 'POST',
    path: '/api/v1/coverage/extract',
    scope: 'coverage:write',
    tag: TAG,
    summary: 'Extract questions from conversations',
    description:
      "Queues a run that reads the workspace's conversations, takes the customers' questions, drops near-duplicates " +
      '(also of questions already in the referential), files each under the closest existing domain or ' +
      '`uncategorized`, and adds them to the referential. Answers 202; one run at a time (409 `conflict`).',
    body: ReferentialBody,
    response: Extraction,
    status: 202,
    errors: ['missing_required_parameter', 'invalid_parameters', 'conflict'],
    handler: ({ tenantId, body, services }) => services.coverage.startExtraction(tenantId, body),
  }),
  defineOperation({
    id: 'getQuestionExtractionStatus',
    method: 'GET',
    path: '/api/v1/coverage/extract/status',
    scope: 'coverage:read',
    tag: TAG,
    summary: 'Get question-extraction progress',
    description:
      'Live progress of the latest question-extraction run: status, processed and total conversations, questions ' +
      'found and added, start and finish times, percent.',
    response: Extraction,
    handler: ({ tenantId, services }) => services.coverage.extractionStatus(tenantId),
  }),
];
