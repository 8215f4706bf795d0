// The records of the simulations area as clients read them (spec: simulation_dataset,
// simulation_test_case, simulation_run; docs/simulations.md for personas and results): the
// response schemas the operations declare, with the record types derived from them, and the
// ordered-list cursor they share.

import { type Static, Type } from '@sinclair/typebox';
import { type SelectQueryBuilder, sql } from 'kysely';
import type { SimulationExpectedType, SimulationResultStatus, SimulationRunStatus } from '../../db/index.js';
import { isUuid } from '../../lib/ids.js';
import { foreignCursor, type Page, toList } from '../pagination.js';
import { JsonObject, Nullable, StringEnum, Timestamp, Uuid } from '../shapes.js';
import type { CaseOutcome } from './evaluation.js';

/** A test case's bounds (characters, counted as code points; steps), enforced on create and kept by import. */
export const TEST_CASE_LIMITS = { text: 4000, answer: 8000, steps: 20 } as const;

export const EXPECTED_TYPES: readonly SimulationExpectedType[] = ['answer', 'tool_call', 'handoff', 'no_answer'];

const RUN_STATUSES: readonly SimulationRunStatus[] = ['queued', 'running', 'completed', 'failed'];

export const ExpectedType = StringEnum(
  EXPECTED_TYPES,
  'answer: the agent answers with the meaning of `expected_answer`; tool_call: it calls `expected_tool_name` ' +
    'with arguments including `expected_tool_args`; handoff: it hands the conversation to `expected_agent_id`; ' +
    'no_answer: it declines (says it does not know).',
);

export const PersonaRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('simulation_persona'),
    name: Type.String(),
    description: Type.String(),
    created_at: Timestamp,
  },
  { title: 'SimulationPersona' },
);
export type PersonaRecord = Static<typeof PersonaRecord>;

export const DatasetRecord = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    object: Type.Literal('simulation_dataset'),
    description: Nullable(Type.String()),
    agent_id: Nullable(Uuid),
    agent_name: Nullable(Type.String()),
    default_persona_id: Nullable(Uuid),
    test_case_count: Type.Integer({ default: 0 }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'SimulationDataset' },
);
export type DatasetRecord = Static<typeof DatasetRecord>;

export const TestCaseStep = Type.Object(
  {
    content: Type.String({
      minLength: 1,
      maxLength: TEST_CASE_LIMITS.text,
      description: 'A later message of the customer.',
    }),
  },
  { additionalProperties: false },
);
export type TestCaseStep = Static<typeof TestCaseStep>;

export const TestCaseRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('simulation_test_case'),
    dataset_id: Uuid,
    question: Type.String(),
    expected_type: ExpectedType,
    expected_answer: Nullable(Type.String()),
    expected_tool_name: Nullable(Type.String()),
    expected_tool_args: JsonObject({ description: 'Arguments the tool call must include (a subset).' }),
    expected_agent_id: Nullable(Uuid),
    expected_agent_name: Nullable(Type.String()),
    persona_id: Nullable(Uuid),
    persona_name: Nullable(Type.String()),
    metadata: JsonObject({
      description: 'Free data; `source_conversation_id` on imported cases, `language` sets the turn language.',
    }),
    api_data_overrides: JsonObject({
      description: 'By tool name: the data an API-backed tool (a workflow) returns in this case.',
    }),
    tool_call_overrides: JsonObject({
      description: 'By tool name: what a tool call returns in this case; wins over api_data_overrides.',
    }),
    order: Type.Integer({ description: 'Play order within the dataset (ascending).' }),
    steps: Type.Array(TestCaseStep, { description: 'Later customer messages, sent one turn after another.' }),
    created_at: Timestamp,
  },
  { title: 'SimulationTestCase' },
);
export type TestCaseRecord = Static<typeof TestCaseRecord>;

export const RunRecord = Type.Object(
  {
    id: Uuid,
    status: StringEnum(RUN_STATUSES, 'queued → running → completed, or failed (see error_message).'),
    object: Type.Literal('simulation_run'),
    dataset_id: Uuid,
    dataset_name: Type.String(),
    agent_id: Uuid,
    agent_name: Type.String(),
    total_tests: Type.Integer({ default: 0 }),
    passed_tests: Type.Integer({ default: 0 }),
    failed_tests: Type.Integer({ default: 0 }),
    success_rate: Nullable(
      Type.Number({
        minimum: 0,
        maximum: 1,
        description: 'passed / (passed + failed), 0 to 1, 4 decimals; null until a case has finished.',
      }),
    ),
    error_message: Nullable(Type.String()),
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
    created_at: Timestamp,
  },
  { title: 'SimulationRun' },
);
export type RunRecord = Static<typeof RunRecord>;

/**
 * A result keeps a type of its own: its outcome's traces are the domain's trace records
 * (./evaluation.ts), which its response schema describes with the operations' trace schema.
 */
export interface ResultRecord {
  id: string;
  object: 'simulation_result';
  run_id: string;
  test_case_id: string;
  order: number;
  question: string;
  expected_type: SimulationExpectedType;
  status: SimulationResultStatus;
  passed: boolean | null;
  reason: string | null;
  score: number | null;
  evaluation: { method: string; rationale: string | null; [key: string]: unknown } | null;
  outcome: CaseOutcome | null;
  started_at: string | null;
  completed_at: string | null;
}

/** Cursor of a list ordered by (order, id) ascending. */
export function encodeOrderCursor(position: number, id: string): string {
  return Buffer.from(`${position}:${id}`, 'utf8').toString('base64url');
}

/** Positions are PostgreSQL `integer`s: a cursor past that range could never have been issued. */
const INT4 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

export function decodeOrderCursor(cursor: string | undefined): { position: number; id: string } | undefined {
  if (cursor === undefined) return undefined;
  const [position, id] = Buffer.from(cursor, 'base64url').toString('utf8').split(':');
  const value = Number(position);
  if (!position || !/^-?\d{1,10}$/.test(position) || value < INT4.min || value > INT4.max || !id || !isUuid(id)) {
    throw foreignCursor();
  }
  return { position: value, id };
}

/**
 * One page of a query in (position, id) order, after the cursor's pair, `limit + 1` rows;
 * `table` qualifies the columns when the query joins.
 */
export function inPositionOrder<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  page: Page,
  table?: string,
): SelectQueryBuilder<DB, TB, O> {
  const column = (name: string) => sql.ref(table ? `${table}.${name}` : name);
  const after = decodeOrderCursor(page.cursor);
  const paged = query
    .orderBy(column('position'))
    .orderBy(column('id'))
    .limit(page.limit + 1);
  return after
    ? paged.where(sql<boolean>`(${column('position')}, ${column('id')}) > (${after.position}, ${after.id}::uuid)`)
    : paged;
}

/** A page of rows fetched by `inPositionOrder`; its cursor carries the last (position, id). */
export function toPositionList<R extends { id: string; position: number | string }, T>(
  rows: R[],
  page: Page,
  toRecord: (row: R) => T,
) {
  const list = toList(rows, page, toRecord, (row) => row.id);
  const last = rows[page.limit - 1];
  return { ...list, next_cursor: list.has_more && last ? encodeOrderCursor(Number(last.position), last.id) : null };
}
