// The records of the simulations area as clients read them (spec: simulation_dataset,
// simulation_test_case, simulation_run; docs/simulations.md for personas and results), and the
// ordered-list cursor they share.

import { type SelectQueryBuilder, sql } from 'kysely';
import type { SimulationExpectedType, SimulationResultStatus, SimulationRunStatus } from '../../db/schema.js';
import { isUuid } from '../../lib/ids.js';
import { foreignCursor, type Page, toList } from '../pagination.js';
import type { CaseOutcome } from './evaluation.js';

/** A test case's bounds (characters, counted as code points; steps), enforced on create and kept by import. */
export const TEST_CASE_LIMITS = { text: 4000, answer: 8000, steps: 20 } as const;

export const EXPECTED_TYPES: readonly SimulationExpectedType[] = ['answer', 'tool_call', 'handoff', 'no_answer'];

export interface PersonaRecord {
  id: string;
  object: 'simulation_persona';
  name: string;
  description: string;
  created_at: string;
}

export interface DatasetRecord {
  id: string;
  name: string;
  object: 'simulation_dataset';
  description: string | null;
  agent_id: string | null;
  agent_name: string | null;
  default_persona_id: string | null;
  test_case_count: number;
  created_at: string;
  updated_at: string;
}

export interface TestCaseStep {
  content: string;
}

export interface TestCaseRecord {
  id: string;
  object: 'simulation_test_case';
  dataset_id: string;
  question: string;
  expected_type: SimulationExpectedType;
  expected_answer: string | null;
  expected_tool_name: string | null;
  expected_tool_args: Record<string, unknown>;
  expected_agent_id: string | null;
  expected_agent_name: string | null;
  persona_id: string | null;
  persona_name: string | null;
  metadata: Record<string, unknown>;
  api_data_overrides: Record<string, unknown>;
  tool_call_overrides: Record<string, unknown>;
  order: number;
  steps: TestCaseStep[];
  created_at: string;
}

export interface RunRecord {
  id: string;
  status: SimulationRunStatus;
  object: 'simulation_run';
  dataset_id: string;
  dataset_name: string;
  agent_id: string;
  agent_name: string;
  total_tests: number;
  passed_tests: number;
  failed_tests: number;
  /** passed / (passed + failed), 0 to 1, rounded to 4 places; null until a case finished. */
  success_rate: number | null;
  error_message: string | null;
  started_at: string | null;
  completed_at: string | null;
  created_at: string;
}

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
