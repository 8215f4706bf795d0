// Runs and their per-case results as the database holds them, and as clients read them
// (spec: simulation_run; docs/simulations.md for results).
import { iso } from '../../lib/time.js';
import type { CaseOutcome } from './evaluation.js';
import type { ResultRecord, RunRecord, TestCaseRecord } from './records.js';

type RunRow = {
  id: string;
  dataset_id: string;
  dataset_name: string;
  agent_id: string;
  agent_name: string;
  status: RunRecord['status'];
  total_tests: number;
  passed_tests: number;
  failed_tests: number;
  error_message: string | null;
  started_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
};

export const toRunRecord = (row: RunRow): RunRecord => {
  const passed = Number(row.passed_tests);
  const failed = Number(row.failed_tests);
  return {
    id: row.id,
    status: row.status,
    object: 'simulation_run',
    dataset_id: row.dataset_id,
    dataset_name: row.dataset_name,
    agent_id: row.agent_id,
    agent_name: row.agent_name,
    total_tests: Number(row.total_tests),
    passed_tests: passed,
    failed_tests: failed,
    success_rate: passed + failed === 0 ? null : Math.round((passed / (passed + failed)) * 10_000) / 10_000,
    error_message: row.error_message,
    started_at: iso(row.started_at),
    completed_at: iso(row.completed_at),
    created_at: iso(row.created_at),
  };
};

export type ResultRow = {
  id: string;
  run_id: string;
  test_case_id: string;
  position: number;
  test_case: Record<string, unknown>;
  status: ResultRecord['status'];
  outcome: Record<string, unknown> | null;
  reason: string | null;
  score: number | null;
  evaluation: Record<string, unknown> | null;
  started_at: Date | null;
  completed_at: Date | null;
};

export const toResultRecord = (row: ResultRow): ResultRecord => {
  const testCase = row.test_case as unknown as TestCaseRecord;
  return {
    id: row.id,
    object: 'simulation_result',
    run_id: row.run_id,
    test_case_id: row.test_case_id,
    order: Number(row.position),
    question: testCase.question,
    expected_type: testCase.expected_type,
    status: row.status,
    passed: row.status === 'passed' ? true : row.status === 'failed' ? false : null,
    reason: row.reason,
    score: row.score === null ? null : Number(row.score),
    evaluation: row.evaluation as ResultRecord['evaluation'],
    outcome: row.outcome as CaseOutcome | null,
    started_at: iso(row.started_at),
    completed_at: iso(row.completed_at),
  };
};

/** The columns `toRunRecord` reads. */
export const RUN_COLUMNS = [
  'id',
  'dataset_id',
  'dataset_name',
  'agent_id',
  'agent_name',
  'status',
  'total_tests',
  'passed_tests',
  'failed_tests',
  'error_message',
  'started_at',
  'completed_at',
  'created_at',
] as const;
