// Reading runs and their results. A run whose job failed for good without failing the run is
// failed first (./run-settlement.ts), so a read never shows it still playing.
import { NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { requireDataset } from './datasets.js';
import { inPositionOrder, type RunRecord, toPositionList } from './records.js';
import { type ResultRow, RUN_COLUMNS, toResultRecord, toRunRecord } from './run-records.js';
import { type RunEndDeps, reconcile } from './run-settlement.js';

export async function getRun(deps: RunEndDeps, tenantId: string, runId: string): Promise<RunRecord> {
  await reconcile(deps, tenantId, { runId });
  const row = await deps.db
    .selectFrom('simulation_runs')
    .select(RUN_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', runId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('simulation run', runId);
  return toRunRecord(row);
}

export async function listRuns(deps: RunEndDeps, tenantId: string, datasetId: string, page: Page) {
  await requireDataset(deps.db, tenantId, datasetId);
  await reconcile(deps, tenantId, { datasetId });
  let query = deps.db
    .selectFrom('simulation_runs')
    .select(RUN_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('dataset_id', '=', datasetId);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toRunRecord, (row) => row.id);
}

/** Per-case results in play order: what the agent did, the verdict and why. */
export async function listResults(deps: RunEndDeps, tenantId: string, runId: string, page: Page) {
  await getRun(deps, tenantId, runId);
  let query = deps.db
    .selectFrom('simulation_results')
    .select([
      'id',
      'run_id',
      'test_case_id',
      'position',
      'test_case',
      'status',
      'outcome',
      'reason',
      'score',
      'evaluation',
      'started_at',
      'completed_at',
    ])
    .where('tenant_id', '=', tenantId)
    .where('run_id', '=', runId);
  query = inPositionOrder(query, page);
  return toPositionList((await query.execute()) as ResultRow[], page, toResultRecord);
}
