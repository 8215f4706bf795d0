// Simulation datasets (DESIGN.md §7; spec: simulation_dataset): named sets of test cases, with
// the agent their runs test by default and the persona their new cases get. Every statement is
// filtered by tenant; ids naming nothing in the tenant are 404 in paths and 422
// `invalid_parameters` in bodies (DESIGN.md §4).
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, InvalidParametersError, NotFoundError, ValidationError } from '../errors.js';
import { decodeIdCursor, type Page, toList } from '../pagination.js';
import type { DatasetRecord } from './records.js';

export interface NewDataset {
  name: string;
  description?: string | undefined;
  agent_id?: string | undefined;
  default_persona_id?: string | undefined;
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

function selectDatasets(db: Db, tenantId: string) {
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

/** Whether this tenant has the agent or persona `id` (a body's reference, checked before use). */
export async function tenantHas(
  db: Db,
  table: 'agents' | 'simulation_personas',
  tenantId: string,
  id: string,
): Promise<boolean> {
  const row = await db
    .selectFrom(table)
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row !== undefined;
}

export async function findDataset(db: Db, tenantId: string, datasetId: string) {
  return db
    .selectFrom('simulation_datasets')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', datasetId)
    .executeTakeFirst();
}

export async function requireDataset(db: Db, tenantId: string, datasetId: string) {
  const row = await findDataset(db, tenantId, datasetId);
  if (!row) throw new NotFoundError('simulation dataset', datasetId);
  return row;
}

/**
 * Locks a dataset's row in a transaction, for statements that must see its test cases as they are
 * now; 404 when it was deleted since it was read.
 */
export async function lockDataset(trx: Db, tenantId: string, datasetId: string) {
  const row = await trx
    .selectFrom('simulation_datasets')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', datasetId)
    .forUpdate()
    .executeTakeFirst();
  if (!row) throw new NotFoundError('simulation dataset', datasetId);
  return row;
}

export async function getDataset(db: Db, tenantId: string, datasetId: string): Promise<DatasetRecord> {
  const row = (await selectDatasets(db, tenantId).where('d.id', '=', datasetId).executeTakeFirst()) as
    | DatasetRow
    | undefined;
  if (!row) throw new NotFoundError('simulation dataset', datasetId);
  return toDatasetRecord(row);
}

export async function createDataset(db: Db, tenantId: string, input: NewDataset): Promise<DatasetRecord> {
  if (input.name.trim() === '') throw new ValidationError('name', 'name must not be blank.');
  if (input.agent_id !== undefined && !(await tenantHas(db, 'agents', tenantId, input.agent_id))) {
    throw new InvalidParametersError('agent_id', `No agent '${input.agent_id}' in this workspace.`);
  }
  if (
    input.default_persona_id !== undefined &&
    !(await tenantHas(db, 'simulation_personas', tenantId, input.default_persona_id))
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
  return getDataset(db, tenantId, id);
}

export async function listDatasets(db: Db, tenantId: string, page: Page) {
  let query = selectDatasets(db, tenantId)
    .orderBy('d.id', 'desc')
    .limit(page.limit + 1);
  const after = decodeIdCursor(page.cursor);
  if (after) query = query.where('d.id', '<', after);
  const rows = (await query.execute()) as DatasetRow[];
  return toList(rows, page, toDatasetRecord, (row) => row.id);
}

/**
 * Deletes a dataset with its test cases, runs and results, and the conversations its runs
 * played (they exist only for the simulation). It may run while the runs play: their rows are
 * locked in the order recording a case takes them (the run, its conversation, its result), so
 * the delete and a case being recorded wait for each other rather than deadlock.
 */
export async function deleteDataset(db: Db, tenantId: string, datasetId: string) {
  return db.transaction().execute(async (trx) => {
    const dataset = await lockDataset(trx, tenantId, datasetId);
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
    await trx.deleteFrom('simulation_datasets').where('tenant_id', '=', tenantId).where('id', '=', datasetId).execute();
    return { id: dataset.id, object: 'deleted' as const, deleted: true };
  });
}
