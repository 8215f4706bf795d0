// Knowledge coverage (scope `coverage`, DESIGN.md §7): referentials and their reference
// questions, domain renames (spec, behaviour rule 6), evaluation runs and the latest coverage,
// question extraction from conversations and its live progress.

import { Type } from '@sinclair/typebox';
import { CoverageRecord, EvaluationRecord, ResultRecord } from '../../domain/coverage/evaluation-records.js';
import { ExtractionRecord } from '../../domain/coverage/extraction-records.js';
import { DomainRename, QuestionList, QuestionRecord } from '../../domain/coverage/questions.js';
import { MAX_DOMAIN_LENGTH, ReferentialRecord } from '../../domain/coverage/referentials.js';
import { Deleted, ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const Domain = Type.String({
  minLength: 1,
  maxLength: MAX_DOMAIN_LENGTH,
  description: 'A domain name, compared exactly.',
});

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
    response: ReferentialRecord,
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
    response: ListOf(ReferentialRecord),
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
    response: ReferentialRecord,
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
    response: ListOf(QuestionRecord),
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
    response: EvaluationRecord,
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
    response: ListOf(EvaluationRecord),
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
    response: EvaluationRecord,
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
    response: ListOf(ResultRecord),
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
    response: CoverageRecord,
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
    response: ExtractionRecord,
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
    response: ExtractionRecord,
    handler: ({ tenantId, services }) => services.coverage.extractionStatus(tenantId),
  }),
];
