// Starting a run (see ./runs.ts): the agent it tests is chosen, and in one transaction the run is
// created, its dataset's cases are snapshotted into `simulation_results` (one `pending` row per
// case) and its job is enqueued.
import type { Db } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import type { AgentService } from '../conversations/agents.js';
import { ConflictError, InvalidParametersError } from '../errors.js';
import { lockDataset, requireDataset } from './datasets.js';
import type { RunRecord } from './records.js';
import { SIMULATION_RUN_JOB } from './run-job.js';
import { RUN_COLUMNS, toRunRecord } from './run-records.js';
import { selectTestCases, type TestCaseRow, toTestCaseRecord } from './test-cases.js';

/** Attempts of a run's job before the run is `failed` (a crash or a database failure each cost one). */
const RUN_MAX_ATTEMPTS = 5;
const INSERT_CHUNK = 500;

export interface RunStartDeps {
  db: Db;
  jobs: JobQueue;
  agents: AgentService;
}

/** The agent a run tests: the one asked for, else the dataset's, else the workspace's default. */
async function chooseAgent(
  agents: AgentService,
  tenantId: string,
  dataset: { agent_id: string | null },
  input: { agent_id?: string | undefined },
): Promise<{ id: string; name: string }> {
  let agent: { id: string; name: string } | undefined;
  if (input.agent_id !== undefined) {
    agent = await agents.findAgent(tenantId, input.agent_id);
    if (!agent) throw new InvalidParametersError('agent_id', `No agent '${input.agent_id}' in this workspace.`);
  } else if (dataset.agent_id) {
    agent = await agents.findAgent(tenantId, dataset.agent_id);
  }
  agent ??= await agents.defaultAgent(tenantId);
  return agent;
}

/** The run's copy of its cases, in play order: the cases' order, made dense so results list in it. */
async function snapshotCases(trx: Db, tenantId: string, runId: string, cases: TestCaseRow[]) {
  for (let i = 0; i < cases.length; i += INSERT_CHUNK) {
    await trx
      .insertInto('simulation_results')
      .values(
        cases.slice(i, i + INSERT_CHUNK).map((row, j) => ({
          id: newId(),
          tenant_id: tenantId,
          run_id: runId,
          test_case_id: row.id,
          position: i + j + 1,
          test_case: JSON.stringify(toTestCaseRecord(row)),
          status: 'pending' as const,
        })),
      )
      .execute();
  }
}

export async function createRun(
  { db, jobs, agents }: RunStartDeps,
  tenantId: string,
  datasetId: string,
  input: { agent_id?: string | undefined },
): Promise<RunRecord> {
  const dataset = await requireDataset(db, tenantId, datasetId);
  const agent = await chooseAgent(agents, tenantId, dataset, input);
  const runId = newId();
  // The run as this transaction commits it: read again afterwards, it may already be gone with
  // a dataset deleted meanwhile, and the request would answer 404 for an id it never sent.
  const row = await db.transaction().execute(async (trx) => {
    // The dataset row is locked so the cases read are the ones it holds now; it may have been
    // deleted since it was read (then 404, as for a run requested after the delete).
    await lockDataset(trx, tenantId, datasetId);
    const cases = (await selectTestCases(trx, tenantId)
      .where('c.dataset_id', '=', datasetId)
      .orderBy('c.position')
      .orderBy('c.id')
      .execute()) as TestCaseRow[];
    if (cases.length === 0) throw new ConflictError('This dataset has no test cases to run; add some first.');
    await trx
      .insertInto('simulation_runs')
      .values({
        id: runId,
        tenant_id: tenantId,
        dataset_id: datasetId,
        dataset_name: dataset.name,
        agent_id: agent.id,
        agent_name: agent.name,
        status: 'queued',
        total_tests: cases.length,
      })
      .execute();
    await snapshotCases(trx, tenantId, runId, cases);
    const job = await jobs.enqueue(trx, {
      kind: SIMULATION_RUN_JOB,
      tenantId,
      payload: { run_id: runId },
      dedupeKey: `simulation-run:${runId}`,
      maxAttempts: RUN_MAX_ATTEMPTS,
    });
    return trx
      .updateTable('simulation_runs')
      .set({ job_id: job.id })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', runId)
      .returning(RUN_COLUMNS)
      .executeTakeFirstOrThrow();
  });
  return toRunRecord(row);
}
