// Personas, datasets and their test cases (DESIGN.md §7; spec: simulation_dataset,
// simulation_test_case). Every statement is filtered by tenant; ids naming nothing in the tenant
// are 404 in paths and 422 `invalid_parameters` in bodies (DESIGN.md §4).
import { sql } from 'kysely';
import { HANDOFF_TOOL } from '../../agent/engine.js';
import type { Db } from '../../db/client.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { SimulationExpectedType } from '../../db/schema.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import {
  ConflictError,
  InvalidParametersError,
  MissingParameterError,
  NotFoundError,
  ValidationError,
} from '../errors.js';
import { decodeIdCursor, newestFirst, type Page, toList } from '../pagination.js';
import {
  type DatasetRecord,
  inPositionOrder,
  type PersonaRecord,
  type TestCaseRecord,
  type TestCaseStep,
  toPositionList,
} from './records.js';

export interface NewDataset {
  name: string;
  description?: string | undefined;
  agent_id?: string | undefined;
  default_persona_id?: string | undefined;
}

export interface NewTestCase {
  question: string;
  expected_type: SimulationExpectedType;
  expected_answer?: string | null | undefined;
  expected_tool_name?: string | null | undefined;
  expected_tool_args?: Record<string, unknown> | null | undefined;
  expected_agent_id?: string | null | undefined;
  persona_id?: string | null | undefined;
  metadata?: Record<string, unknown> | undefined;
  api_data_overrides?: Record<string, unknown> | undefined;
  tool_call_overrides?: Record<string, unknown> | undefined;
  order?: number | undefined;
  steps?: TestCaseStep[] | undefined;
}

type DatasetRow = {
  id: string;
  name: string;
  description: string | null;
  agent_id: string | null;
  agent_name: string | null;
  default_persona_id: string | null;
  test_case_count: number;
  created_at: Date;
  updated_at: Date;
};

const toDatasetRecord = (row: DatasetRow): DatasetRecord => ({
  id: row.id,
  name: row.name,
  object: 'simulation_dataset',
  description: row.description,
  agent_id: row.agent_id,
  agent_name: row.agent_name,
  default_persona_id: row.default_persona_id,
  test_case_count: Number(row.test_case_count),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

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

const toPersonaRecord = (row: { id: string; name: string; description: string; created_at: Date }): PersonaRecord => ({
  id: row.id,
  object: 'simulation_persona',
  name: row.name,
  description: row.description,
  created_at: iso(row.created_at),
});

const blank = (value: string | null | undefined) => value === undefined || value === null || value.trim() === '';

/** Override maps name tools; the engine's own handoff tool cannot be overridden. */
function checkOverrides(param: 'tool_call_overrides' | 'api_data_overrides', overrides: Record<string, unknown>) {
  for (const name of Object.keys(overrides)) {
    if (name === HANDOFF_TOOL) {
      throw new ValidationError(
        `${param}.${name}`,
        `'${HANDOFF_TOOL}' is the engine's handoff tool; it cannot be overridden.`,
      );
    }
    if (name.trim() === '' || name.length > 100) {
      throw new ValidationError(`${param}.${name}`, `${param} keys are tool names of 1 to 100 characters.`);
    }
  }
}

export function createDatasetStore({ db }: { db: Db }) {
  function selectDatasets(tenantId: string) {
    return db
      .selectFrom('simulation_datasets as d')
      .leftJoin('agents as a', (join) => join.onRef('a.id', '=', 'd.agent_id').on('a.tenant_id', '=', tenantId))
      .select([
        'd.id',
        'd.name',
        'd.description',
        'd.agent_id',
        'a.name as agent_name',
        'd.default_persona_id',
        'd.created_at',
        'd.updated_at',
      ])
      .select((eb) =>
        eb
          .selectFrom('simulation_test_cases as c')
          .select(sql<number>`count(*)::int`.as('n'))
          .whereRef('c.dataset_id', '=', 'd.id')
          .where('c.tenant_id', '=', tenantId)
          .as('test_case_count'),
      )
      .where('d.tenant_id', '=', tenantId);
  }

  /** Test cases with their agent and persona names; `executor` lets a transaction read them. */
  function selectTestCases(tenantId: string, executor: Db = db) {
    return executor
      .selectFrom('simulation_test_cases as c')
      .leftJoin('agents as a', (join) =>
        join.onRef('a.id', '=', 'c.expected_agent_id').on('a.tenant_id', '=', tenantId),
      )
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

  /** Whether this tenant has the agent or persona `id` (a body's reference, checked before use). */
  async function exists(table: 'agents' | 'simulation_personas', tenantId: string, id: string): Promise<boolean> {
    const row = await db
      .selectFrom(table)
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  async function findDataset(tenantId: string, datasetId: string) {
    return db
      .selectFrom('simulation_datasets')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', datasetId)
      .executeTakeFirst();
  }

  async function requireDataset(tenantId: string, datasetId: string) {
    const row = await findDataset(tenantId, datasetId);
    if (!row) throw new NotFoundError('simulation dataset', datasetId);
    return row;
  }

  /** Checks a test case against the rules of its `expected_type` and the tenant's agents and personas. */
  async function checkTestCase(tenantId: string, input: NewTestCase): Promise<void> {
    if (input.question.trim() === '') throw new ValidationError('question', 'question must not be blank.');
    (input.steps ?? []).forEach((step, i) => {
      if (step.content.trim() === '') {
        throw new ValidationError(`steps[${i}].content`, `steps[${i}].content must not be blank.`);
      }
    });
    switch (input.expected_type) {
      case 'answer':
        if (blank(input.expected_answer)) {
          throw new MissingParameterError('expected_answer', "An 'answer' test case needs expected_answer.");
        }
        break;
      case 'tool_call':
        if (blank(input.expected_tool_name)) {
          throw new MissingParameterError('expected_tool_name', "A 'tool_call' test case needs expected_tool_name.");
        }
        break;
      case 'handoff':
        if (blank(input.expected_agent_id)) {
          throw new MissingParameterError('expected_agent_id', "A 'handoff' test case needs expected_agent_id.");
        }
        break;
      case 'no_answer':
        break;
    }
    if (!blank(input.expected_agent_id) && !(await exists('agents', tenantId, input.expected_agent_id as string))) {
      throw new InvalidParametersError('expected_agent_id', `No agent '${input.expected_agent_id}' in this workspace.`);
    }
    if (!blank(input.persona_id) && !(await exists('simulation_personas', tenantId, input.persona_id as string))) {
      throw new InvalidParametersError('persona_id', `No simulation persona '${input.persona_id}' in this workspace.`);
    }
    checkOverrides('tool_call_overrides', input.tool_call_overrides ?? {});
    checkOverrides('api_data_overrides', input.api_data_overrides ?? {});
  }

  async function getDataset(tenantId: string, datasetId: string): Promise<DatasetRecord> {
    const row = (await selectDatasets(tenantId).where('d.id', '=', datasetId).executeTakeFirst()) as
      | DatasetRow
      | undefined;
    if (!row) throw new NotFoundError('simulation dataset', datasetId);
    return toDatasetRecord(row);
  }

  return {
    findDataset,
    requireDataset,
    selectTestCases,

    async createPersona(tenantId: string, input: { name: string; description: string }): Promise<PersonaRecord> {
      if (input.name.trim() === '') throw new ValidationError('name', 'name must not be blank.');
      try {
        const row = await db
          .insertInto('simulation_personas')
          .values({ id: newId(), tenant_id: tenantId, name: input.name, description: input.description })
          .returning(['id', 'name', 'description', 'created_at'])
          .executeTakeFirstOrThrow();
        return toPersonaRecord(row);
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ConflictError(`A persona named '${input.name}' already exists.`, 'name');
        throw error;
      }
    },

    async listPersonas(tenantId: string, page: Page) {
      let query = db
        .selectFrom('simulation_personas')
        .select(['id', 'name', 'description', 'created_at'])
        .where('tenant_id', '=', tenantId);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toPersonaRecord, (row) => row.id);
    },

    async createDataset(tenantId: string, input: NewDataset): Promise<DatasetRecord> {
      if (input.name.trim() === '') throw new ValidationError('name', 'name must not be blank.');
      if (input.agent_id !== undefined && !(await exists('agents', tenantId, input.agent_id))) {
        throw new InvalidParametersError('agent_id', `No agent '${input.agent_id}' in this workspace.`);
      }
      if (
        input.default_persona_id !== undefined &&
        !(await exists('simulation_personas', tenantId, input.default_persona_id))
      ) {
        throw new InvalidParametersError(
          'default_persona_id',
          `No simulation persona '${input.default_persona_id}' in this workspace.`,
        );
      }
      const id = newId();
      try {
        await db
          .insertInto('simulation_datasets')
          .values({
            id,
            tenant_id: tenantId,
            name: input.name,
            description: input.description ?? null,
            agent_id: input.agent_id ?? null,
            default_persona_id: input.default_persona_id ?? null,
          })
          .execute();
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new ConflictError(`A simulation dataset named '${input.name}' already exists.`, 'name');
        }
        throw error;
      }
      return getDataset(tenantId, id);
    },

    async listDatasets(tenantId: string, page: Page) {
      let query = selectDatasets(tenantId)
        .orderBy('d.id', 'desc')
        .limit(page.limit + 1);
      const after = decodeIdCursor(page.cursor);
      if (after) query = query.where('d.id', '<', after);
      const rows = (await query.execute()) as DatasetRow[];
      return toList(rows, page, toDatasetRecord, (row) => row.id);
    },

    getDataset,

    /**
     * Deletes a dataset with its test cases, runs and results, and the conversations its runs
     * played (they exist only for the simulation). It may run while the runs play: their rows are
     * locked in the order recording a case takes them (the run, its conversation, its result), so
     * the delete and a case being recorded wait for each other rather than deadlock.
     */
    async deleteDataset(tenantId: string, datasetId: string) {
      return db.transaction().execute(async (trx) => {
        const dataset = await trx
          .selectFrom('simulation_datasets')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', datasetId)
          .forUpdate()
          .executeTakeFirst();
        if (!dataset) throw new NotFoundError('simulation dataset', datasetId);
        const runIds = trx
          .selectFrom('simulation_runs')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('dataset_id', '=', datasetId);
        // The runs before their conversations: the cascade below would take them after.
        await runIds.orderBy('id').forUpdate().execute();
        await trx
          .deleteFrom('conversations')
          .where('tenant_id', '=', tenantId)
          .where('id', 'in', (eb) =>
            eb
              .selectFrom('simulation_conversations')
              .select('conversation_id')
              .where('tenant_id', '=', tenantId)
              .where('run_id', 'in', runIds),
          )
          .execute();
        await trx
          .deleteFrom('simulation_datasets')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', datasetId)
          .execute();
        return { id: dataset.id, object: 'deleted' as const, deleted: true };
      });
    },

    checkTestCase,

    async createTestCase(tenantId: string, datasetId: string, input: NewTestCase): Promise<TestCaseRecord> {
      const dataset = await requireDataset(tenantId, datasetId);
      await checkTestCase(tenantId, input);
      const id = newId();
      // The case as this transaction commits it: read again afterwards, it may already be gone with
      // a dataset deleted meanwhile, and the request would answer 404 for an id it never sent.
      const row = await db.transaction().execute(async (trx) => {
        // The dataset row is locked so concurrent creates number their cases one after another; it
        // may have been deleted since it was read (then 404, as for a create sent after the delete).
        const locked = await trx
          .selectFrom('simulation_datasets')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', datasetId)
          .forUpdate()
          .executeTakeFirst();
        if (!locked) throw new NotFoundError('simulation dataset', datasetId);
        let position = input.order;
        if (position === undefined) {
          const last = await trx
            .selectFrom('simulation_test_cases')
            .select(sql<number | null>`max(position)`.as('max'))
            .where('tenant_id', '=', tenantId)
            .where('dataset_id', '=', datasetId)
            .executeTakeFirstOrThrow();
          position = (last.max === null ? 0 : Number(last.max)) + 1;
        }
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
        await trx
          .updateTable('simulation_datasets')
          .set({ updated_at: new Date() })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', datasetId)
          .execute();
        return (await selectTestCases(tenantId, trx).where('c.id', '=', id).executeTakeFirstOrThrow()) as TestCaseRow;
      });
      return toTestCaseRecord(row);
    },

    /** Test cases in `order` (then creation), the order a run plays them in. */
    async listTestCases(tenantId: string, datasetId: string, page: Page) {
      await requireDataset(tenantId, datasetId);
      const query = inPositionOrder(selectTestCases(tenantId).where('c.dataset_id', '=', datasetId), page, 'c');
      return toPositionList((await query.execute()) as TestCaseRow[], page, toTestCaseRecord);
    },

    async deleteTestCase(tenantId: string, datasetId: string, testCaseId: string) {
      await requireDataset(tenantId, datasetId);
      const row = await db
        .deleteFrom('simulation_test_cases')
        .where('tenant_id', '=', tenantId)
        .where('dataset_id', '=', datasetId)
        .where('id', '=', testCaseId)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('simulation test case', testCaseId);
      await db
        .updateTable('simulation_datasets')
        .set({ updated_at: new Date() })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', datasetId)
        .execute();
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },
  };
}

export type DatasetStore = ReturnType<typeof createDatasetStore>;
