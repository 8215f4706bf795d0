// Simulations (scope `simulations`, DESIGN.md §7): personas, datasets, test cases, import from a
// conversation, runs and their per-case results. Spec records: simulation_dataset,
// simulation_test_case, simulation_run; rules and decisions in docs/simulations.md.

import { type Static, type TObject, Type } from '@sinclair/typebox';
import { BadRequestError } from '../../domain/errors.js';
import { Deleted, JsonObject, ListOf, ListQuery, Nullable, StringEnum, Timestamp, Uuid } from '../../domain/shapes.js';
import {
  DatasetRecord,
  ExpectedType,
  PersonaRecord,
  RunRecord,
  TEST_CASE_LIMITS,
  TestCaseRecord,
  TestCaseStep,
} from '../../domain/simulations/records.js';
import { MessageTrace } from '../conversations/trace-schema.js';
import { defineOperation } from '../registry.js';

const ToolCallDone = Type.Object({
  name: Type.String(),
  type: Type.String({ description: 'client (lent to the agent for the case) or workflow.' }),
  arguments: JsonObject({ description: 'The arguments the agent sent.' }),
  status: Type.String(),
  output: Type.Unknown(),
});

const Outcome = Type.Object(
  {
    answer: Type.String({ description: "The agent's last answer." }),
    turn_status: Type.String({ description: 'Status of the last turn played (COMPLETED, FAILED, …).' }),
    error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
    tool_calls: Type.Array(ToolCallDone),
    handoff: Nullable(Type.Object({ agent_id: Uuid, agent_name: Type.String() })),
    declined: Type.Boolean({ description: 'The agent said it does not know.' }),
    citations: Type.Array(Type.Object({ document_id: Type.String(), title: Type.String() })),
    turns: Type.Integer(),
    transcript: Type.Array(
      Type.Object({
        author: StringEnum(['customer', 'agent'] as const),
        content: Type.String(),
        status: Nullable(Type.String({ description: "The agent turn's status; null for customer messages." })),
        message_id: Type.Optional(
          Type.String({
            description: 'The agent message, whose trace is in `traces` (the message itself is not kept).',
          }),
        ),
      }),
      { description: 'The simulated conversation, message by message; the conversation itself is not kept.' },
    ),
    traces: Type.Optional(
      Type.Array(MessageTrace, {
        description:
          'The trace of each agent turn of the case (as GET /messages/{id}/trace answers it), copied when the case ' +
          'is recorded, since its conversation and messages are deleted then.',
      }),
    ),
  },
  { description: 'What the agent did over the whole case.' },
);

const Result = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('simulation_result'),
    run_id: Uuid,
    test_case_id: Uuid,
    order: Type.Integer({ description: 'Play order within the run, from 1.' }),
    question: Type.String(),
    expected_type: ExpectedType,
    status: StringEnum(['pending', 'running', 'passed', 'failed'] as const),
    passed: Nullable(Type.Boolean()),
    reason: Nullable(Type.String({ description: 'Why the case passed or failed.' })),
    score: Nullable(Type.Number({ description: 'Similarity (token F1) or the LLM judge score, 0 to 1.' })),
    evaluation: Nullable(
      Type.Object(
        {
          method: Type.String({ description: 'token_overlap, llm_judge or rules.' }),
          rationale: Nullable(Type.String({ description: "The LLM judge's rationale." })),
        },
        { additionalProperties: true },
      ),
    ),
    outcome: Nullable(Outcome),
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
  },
  { title: 'SimulationResult' },
);

const DatasetParams = Type.Object({ dataset_id: Uuid });

/**
 * A body the client may leave out (starting a run, importing): the schema has no top-level
 * `type`, because the validator would refuse an absent body; `bodyObject` refuses a non-object.
 */
function optionalBody<T extends TObject>(schema: T) {
  const { type: _type, ...rest } = schema;
  return Type.Unsafe<Static<T> | undefined>(rest);
}

function bodyObject<T extends object>(body: T | undefined): T | Record<string, never> {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadRequestError('The request body must be a JSON object.');
  return body;
}
const OptionalText = (max: number) => Type.Optional(Type.String({ maxLength: max }));

const TestCaseBody = Type.Object(
  {
    question: Type.String({ minLength: 1, maxLength: TEST_CASE_LIMITS.text }),
    expected_type: ExpectedType,
    expected_answer: Type.Optional(Nullable(Type.String({ maxLength: TEST_CASE_LIMITS.answer }))),
    expected_tool_name: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 100 }))),
    expected_tool_args: Type.Optional(Nullable(Type.Object({}, { additionalProperties: true }))),
    expected_agent_id: Type.Optional(Nullable(Uuid)),
    persona_id: Type.Optional(Nullable(Uuid)),
    metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
    api_data_overrides: Type.Optional(Type.Object({}, { additionalProperties: true })),
    tool_call_overrides: Type.Optional(Type.Object({}, { additionalProperties: true })),
    order: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    steps: Type.Optional(Type.Array(TestCaseStep, { maxItems: TEST_CASE_LIMITS.steps })),
  },
  { additionalProperties: false },
);

export const simulationOperations = [
  defineOperation({
    id: 'createSimulationPersona',
    method: 'POST',
    path: '/api/v1/simulation/personas',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Create a persona',
    description:
      'Creates a persona: who asks a test case (a name, unique in the workspace, and a description). ' +
      'Test cases and datasets refer to it; a run sends the case messages verbatim. Returns the persona.',
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 100 }),
        description: Type.String({ maxLength: 2000 }),
      },
      { additionalProperties: false },
    ),
    response: PersonaRecord,
    status: 201,
    errors: ['missing_required_parameter', 'conflict'],
    handler: ({ tenantId, body, services }) => services.simulations.createPersona(tenantId, body),
  }),
  defineOperation({
    id: 'listSimulationPersonas',
    method: 'GET',
    path: '/api/v1/simulation/personas',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'List personas',
    description: 'Lists the personas of the workspace, newest first.',
    query: ListQuery,
    response: ListOf(PersonaRecord),
    handler: ({ tenantId, query, services }) => services.simulations.listPersonas(tenantId, query),
  }),
  defineOperation({
    id: 'createSimulationDataset',
    method: 'POST',
    path: '/api/v1/simulation/datasets',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Create a simulation dataset',
    description:
      'Creates a dataset of test cases (name unique in the workspace). `agent_id` is the agent its runs test ' +
      'by default (an agent of this workspace, else 422 `invalid_parameters`); `default_persona_id` the persona ' +
      'its new test cases get. Returns the dataset with `test_case_count` 0.',
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 200 }),
        description: OptionalText(2000),
        agent_id: Type.Optional(Uuid),
        default_persona_id: Type.Optional(Uuid),
      },
      { additionalProperties: false },
    ),
    response: DatasetRecord,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters', 'conflict'],
    handler: ({ tenantId, body, services }) => services.simulations.createDataset(tenantId, body),
  }),
  defineOperation({
    id: 'listSimulationDatasets',
    method: 'GET',
    path: '/api/v1/simulation/datasets',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'List simulation datasets',
    description: 'Lists the datasets of the workspace, newest first, with their test case counts.',
    query: ListQuery,
    response: ListOf(DatasetRecord),
    handler: ({ tenantId, query, services }) => services.simulations.listDatasets(tenantId, query),
  }),
  defineOperation({
    id: 'getSimulationDataset',
    method: 'GET',
    path: '/api/v1/simulation/datasets/:dataset_id',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'Get a simulation dataset',
    description: 'Returns one dataset with its agent and test case count.',
    params: DatasetParams,
    response: DatasetRecord,
    handler: ({ tenantId, params, services }) => services.simulations.getDataset(tenantId, params.dataset_id),
  }),
  defineOperation({
    id: 'deleteSimulationDataset',
    method: 'DELETE',
    path: '/api/v1/simulation/datasets/:dataset_id',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Delete a simulation dataset',
    description:
      'Deletes a dataset with its test cases, its runs and their results, and the conversations those runs ' +
      'played. Answers the deleted acknowledgement; the dataset then answers 404.',
    params: DatasetParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.simulations.deleteDataset(tenantId, params.dataset_id),
  }),
  defineOperation({
    id: 'createSimulationTestCase',
    method: 'POST',
    path: '/api/v1/simulation/datasets/:dataset_id/test-cases',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Add a test case',
    description:
      'Adds a test case to a dataset. `expected_type` decides what else is required: `answer` needs ' +
      '`expected_answer`, `tool_call` needs `expected_tool_name` (`expected_tool_args` optional, matched as a ' +
      'subset), `handoff` needs `expected_agent_id` (an agent of this workspace), `no_answer` nothing more. ' +
      '`steps` are later customer messages played in the same conversation; `tool_call_overrides` and ' +
      '`api_data_overrides` (by tool name) replace what tools return, so the case is repeatable. `order` ' +
      'defaults to after the last case. Returns the test case.',
    params: DatasetParams,
    body: TestCaseBody,
    response: TestCaseRecord,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: ({ tenantId, params, body, services }) =>
      services.simulations.createTestCase(tenantId, params.dataset_id, body),
  }),
  defineOperation({
    id: 'listSimulationTestCases',
    method: 'GET',
    path: '/api/v1/simulation/datasets/:dataset_id/test-cases',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'List test cases',
    description: 'Lists the test cases of a dataset in `order` (ascending), the order a run plays them in.',
    params: DatasetParams,
    query: ListQuery,
    response: ListOf(TestCaseRecord),
    handler: ({ tenantId, params, query, services }) =>
      services.simulations.listTestCases(tenantId, params.dataset_id, query),
  }),
  defineOperation({
    id: 'deleteSimulationTestCase',
    method: 'DELETE',
    path: '/api/v1/simulation/datasets/:dataset_id/test-cases/:test_case_id',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Delete a test case',
    description:
      'Deletes a test case from its dataset. Runs already started keep playing their snapshot of it. ' +
      'Answers the deleted acknowledgement.',
    params: Type.Object({ dataset_id: Uuid, test_case_id: Uuid }),
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) =>
      services.simulations.deleteTestCase(tenantId, params.dataset_id, params.test_case_id),
  }),
  defineOperation({
    id: 'importSimulationConversation',
    method: 'POST',
    path: '/api/v1/simulation/datasets/:dataset_id/import/conversation/:thread_id',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Import a test case from a conversation',
    description:
      'Builds a test case from a conversation (`thread_id` is its id) and adds it to the dataset: the first ' +
      "customer message is the question, later ones the steps; the agent's handoff, first tool call, declined " +
      'answer or final answer sets the expected type and values, and the tool outputs become ' +
      '`tool_call_overrides`. E-mail addresses, phone numbers and card numbers are replaced with placeholders ' +
      'unless `redact_pii` is false. `metadata.source_conversation_id` names the conversation. The body is ' +
      'optional. Returns the test case.',
    params: Type.Object({ dataset_id: Uuid, thread_id: Uuid }),
    body: optionalBody(
      Type.Object(
        {
          redact_pii: Type.Optional(Type.Boolean({ description: 'Replace personal data; true when absent.' })),
          persona_id: Type.Optional(Uuid),
        },
        { additionalProperties: false },
      ),
    ),
    response: TestCaseRecord,
    status: 201,
    errors: ['invalid_parameters', 'conflict'],
    handler: ({ tenantId, params, body, services }) =>
      services.simulations.importConversation(tenantId, params.dataset_id, params.thread_id, bodyObject(body)),
  }),
  defineOperation({
    id: 'createSimulationRun',
    method: 'POST',
    path: '/api/v1/simulation/datasets/:dataset_id/runs',
    scope: 'simulations:write',
    tag: 'Simulations',
    summary: 'Start a simulation run',
    description:
      "Starts a run of every test case of the dataset against the agent (`agent_id`, else the dataset's " +
      "agent, else the workspace's default agent). Answers 201 with the run, status `queued`; it runs on the " +
      'job queue and its counts update as cases finish (`GET /simulation/runs/{run_id}`). A dataset without ' +
      'test cases answers 409 `conflict`.',
    params: DatasetParams,
    body: optionalBody(Type.Object({ agent_id: Type.Optional(Uuid) }, { additionalProperties: false })),
    response: RunRecord,
    status: 201,
    errors: ['invalid_parameters', 'conflict'],
    handler: ({ tenantId, params, body, services }) =>
      services.simulations.createRun(tenantId, params.dataset_id, bodyObject(body)),
  }),
  defineOperation({
    id: 'listSimulationRuns',
    method: 'GET',
    path: '/api/v1/simulation/datasets/:dataset_id/runs',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'List the runs of a dataset',
    description: 'Lists the runs of a dataset, newest first.',
    params: DatasetParams,
    query: ListQuery,
    response: ListOf(RunRecord),
    handler: ({ tenantId, params, query, services }) =>
      services.simulations.listRuns(tenantId, params.dataset_id, query),
  }),
  defineOperation({
    id: 'getSimulationRun',
    method: 'GET',
    path: '/api/v1/simulation/runs/:run_id',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'Get a simulation run',
    description: 'Returns a run with its live status, counts and success rate.',
    params: Type.Object({ run_id: Uuid }),
    response: RunRecord,
    handler: ({ tenantId, params, services }) => services.simulations.getRun(tenantId, params.run_id),
  }),
  defineOperation({
    id: 'listSimulationRunResults',
    method: 'GET',
    path: '/api/v1/simulation/runs/:run_id/results',
    scope: 'simulations:read',
    tag: 'Simulations',
    summary: 'List the results of a run',
    description:
      'Lists the per-case results of a run in play order: what the agent did (answer, tool calls, handoff, ' +
      'whether it declined), whether the case passed, and why.',
    params: Type.Object({ run_id: Uuid }),
    query: ListQuery,
    response: ListOf(Result),
    handler: ({ tenantId, params, query, services }) =>
      services.simulations.listResults(tenantId, params.run_id, query),
  }),
];
