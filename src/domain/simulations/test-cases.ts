// The test cases of a dataset (spec: simulation_test_case): added one at a time (by a client or
// an import), listed in play order, deleted. A case's `order` defaults to after the last one.
import { sql } from 'kysely';
import type { Db, SimulationExpectedType } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import type { Page } from '../pagination.js';
import { lockDataset, requireDataset } from './datasets.js';
import { inPositionOrder, type TestCaseRecord, type TestCaseStep, toPositionList } from './records.js';
import { blank, checkTestCase, type NewTestCase } from './test-case-rules.js';

export type TestCaseRow = {
  id: string;
  dataset_id: string;
  position: number;
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
  steps: TestCaseStep[];
  created_at: Date;
};

export const toTestCaseRecord = (row: TestCaseRow): TestCaseRecord => ({
  id: row.id,
  object: 'simulation_test_case',
  dataset_id: row.dataset_id,
  question: row.question,
  expected_type: row.expected_type,
  expected_answer: row.expected_answer,
  expected_tool_name: row.expected_tool_name,
  expected_tool_args: row.expected_tool_args ?? {},
  expected_agent_id: row.expected_agent_id,
  expected_agent_name: row.expected_agent_name,
  persona_id: row.persona_id,
  persona_name: row.persona_name,
  metadata: row.metadata ?? {},
  api_data_overrides: row.api_data_overrides ?? {},
  tool_call_overrides: row.tool_call_overrides ?? {},
  order: Number(row.position),
  steps: row.steps ?? [],
  created_at: iso(row.created_at),
});

/** Test cases with their agent and persona names; a transaction as `executor` reads them in it. */
export function selectTestCases(executor: Db, tenantId: string) {
  return executor
    .selectFrom('simulation_test_cases as c')
    .leftJoin('agents as a', (join) => join.onRef('a.id', '=', 'c.expected_agent_id').on('a.tenant_id', '=', tenantId))
    .leftJoin('simulation_personas as p', (join) =>
      join.onRef('p.id', '=', 'c.persona_id').on('p.tenant_id', '=', tenantId),
    )
    .select([
      'c.id',
      'c.dataset_id',
      'c.position',
      'c.question',
      'c.expected_type',
      'c.expected_answer',
      'c.expected_tool_name',
      'c.expected_tool_args',
      'c.expected_agent_id',
      'a.name as expected_agent_name',
      'c.persona_id',
      'p.name as persona_name',
      'c.metadata',
      'c.api_data_overrides',
      'c.tool_call_overrides',
      'c.steps',
      'c.created_at',
    ])
    .where('c.tenant_id', '=', tenantId);
}

/** The position after the dataset's last case. */
async function nextPosition(trx: Db, tenantId: string, datasetId: string): Promise<number> {
  const last = await trx
    .selectFrom('simulation_test_cases')
    .select(sql<number | null>`max(position)`.as('max'))
    .where('tenant_id', '=', tenantId)
    .where('dataset_id', '=', datasetId)
    .executeTakeFirstOrThrow();
  return (last.max === null ? 0 : Number(last.max)) + 1;
}

async function touchDataset(executor: Db, tenantId: string, datasetId: string) {
  await executor
    .updateTable('simulation_datasets')
    .set({ updated_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', datasetId)
    .execute();
}

export async function createTestCase(
  db: Db,
  tenantId: string,
  datasetId: string,
  input: NewTestCase,
): Promise<TestCaseRecord> {
  const dataset = await requireDataset(db, tenantId, datasetId);
  await checkTestCase(db, tenantId, input);
  const id = newId();
  // The case as this transaction commits it: read again afterwards, it may already be gone with
  // a dataset deleted meanwhile, and the request would answer 404 for an id it never sent.
  const row = await db.transaction().execute(async (trx) => {
    // The dataset row is locked so concurrent creates number their cases one after another; it
    // may have been deleted since it was read (then 404, as for a create sent after the delete).
    await lockDataset(trx, tenantId, datasetId);
    const position = input.order !== undefined ? input.order : await nextPosition(trx, tenantId, datasetId);
    await trx
      .insertInto('simulation_test_cases')
      .values({
        id,
        tenant_id: tenantId,
        dataset_id: datasetId,
        position,
        question: input.question,
        expected_type: input.expected_type,
        expected_answer: input.expected_answer ?? null,
        expected_tool_name: input.expected_tool_name ?? null,
        expected_tool_args: JSON.stringify(input.expected_tool_args ?? {}),
        expected_agent_id: blank(input.expected_agent_id) ? null : (input.expected_agent_id as string),
        persona_id: blank(input.persona_id) ? dataset.default_persona_id : (input.persona_id as string),
        metadata: JSON.stringify(input.metadata ?? {}),
        api_data_overrides: JSON.stringify(input.api_data_overrides ?? {}),
        tool_call_overrides: JSON.stringify(input.tool_call_overrides ?? {}),
        steps: JSON.stringify(input.steps ?? []),
      })
      .execute();
    await touchDataset(trx, tenantId, datasetId);
    return (await selectTestCases(trx, tenantId).where('c.id', '=', id).executeTakeFirstOrThrow()) as TestCaseRow;
  });
  return toTestCaseRecord(row);
}

/** Test cases in `order` (then creation), the order a run plays them in. */
export async function listTestCases(db: Db, tenantId: string, datasetId: string, page: Page) {
  await requireDataset(db, tenantId, datasetId);
  const query = inPositionOrder(selectTestCases(db, tenantId).where('c.dataset_id', '=', datasetId), page, 'c');
  return toPositionList((await query.execute()) as TestCaseRow[], page, toTestCaseRecord);
}

export async function deleteTestCase(db: Db, tenantId: string, datasetId: string, testCaseId: string) {
  await requireDataset(db, tenantId, datasetId);
  const row = await db
    .deleteFrom('simulation_test_cases')
    .where('tenant_id', '=', tenantId)
    .where('dataset_id', '=', datasetId)
    .where('id', '=', testCaseId)
    .returning('id')
    .executeTakeFirst();
  if (!row) throw new NotFoundError('simulation test case', testCaseId);
  await touchDataset(db, tenantId, datasetId);
  return { id: row.id, object: 'deleted' as const, deleted: true };
}
