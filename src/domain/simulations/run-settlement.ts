// How a run ends (see ./runs.ts): completed by its job, or failed (its agent gone, its job failed
// for good). Every path goes through `settle`, which sends `simulation.run.completed` in the
// transaction that ends the run, so the event is sent exactly once.
import type { Db } from '../../db/index.js';
import type { EmitEvent } from '../webhooks/events.js';
import { RUN_COLUMNS, toRunRecord } from './run-records.js';

export interface RunEndDeps {
  db: Db;
  /** Webhook events: `simulation.run.completed`, sent with the run's last state. */
  emitEvent?: EmitEvent | undefined;
}

/**
 * Ends a run (completed or failed) if it is still in one of `from`, and reports it to webhooks in
 * the same transaction, so the event is sent exactly when the run ends.
 */
export async function settle(
  deps: RunEndDeps,
  tenantId: string,
  runId: string,
  end: { status: 'completed' } | { status: 'failed'; error_message: string },
  from: ('queued' | 'running')[],
  completedAt: Date = new Date(),
) {
  await deps.db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('simulation_runs')
      .set({ ...end, completed_at: completedAt })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', runId)
      .where('status', 'in', from)
      .returning(RUN_COLUMNS)
      .executeTakeFirst();
    if (row && deps.emitEvent) {
      await deps.emitEvent(trx, tenantId, 'simulation.run.completed', { run: toRunRecord(row) });
    }
  });
}

/** Fails an open run; `at` is when it ended (its job's end, when that was earlier than now). */
export async function markFailed(deps: RunEndDeps, tenantId: string, runId: string, message: string, at = new Date()) {
  await settle(deps, tenantId, runId, { status: 'failed', error_message: message }, ['queued', 'running'], at);
}

/**
 * A run whose job failed for good but is still open (the job failed on another queue, or its
 * process stopped before `onFailed` ran) is failed now, through `settle`, so its event is sent
 * once whichever path ends it.
 */
export async function reconcile(deps: RunEndDeps, tenantId: string, scope: { runId?: string; datasetId?: string }) {
  let query = deps.db
    .selectFrom('simulation_runs as r')
    .innerJoin('jobs as j', 'j.id', 'r.job_id')
    .select(['r.id', 'j.last_error', 'j.finished_at'])
    .where('r.tenant_id', '=', tenantId)
    .where('r.status', 'in', ['queued', 'running'])
    .where('j.status', '=', 'failed');
  if (scope.runId) query = query.where('r.id', '=', scope.runId);
  if (scope.datasetId) query = query.where('r.dataset_id', '=', scope.datasetId);
  for (const row of await query.execute()) {
    const message = row.last_error ?? 'The run stopped: its job failed.';
    await markFailed(deps, tenantId, row.id, message, row.finished_at ?? undefined);
  }
}
