// Simulation runs (DESIGN.md §5, §7, §8): a run plays every test case of a dataset against the
// agent, through the same turn engine customers get, on the durable job queue.
//
// Surviving restarts on top of the queue's at-least-once leases:
// - Starting a run snapshots its cases into `simulation_results`, one row per case (unique per
//   run and case), status `pending`, in the same transaction that enqueues the job.
// - The job plays cases one by one (SIMULATION_CONCURRENCY at once): it claims a row
//   (`pending`, or `running` under an older job attempt, i.e. left by a worker that died) with
//   one `UPDATE … FOR UPDATE SKIP LOCKED` statement that stamps it with its own attempt number,
//   plays the case, and writes the verdict and the run's counters in one transaction, on the
//   condition that the row is still `running` under its attempt. A worker that lost its lease
//   can therefore never record a case twice, and a re-claimed job continues with the cases
//   without a verdict. A case interrupted mid-play is played again from its start; the
//   unfinished conversation it left is deleted first, so each case keeps one conversation and
//   one result.
// - Each run job plays with a turn engine of its own, closed when the queue stops the job (the
//   server is stopping and the grace period is over, or the lease passed on): the turns it was
//   playing end at once. A case whose turn the stop cut short is no verdict: it goes back to
//   `pending` (its conversation deleted), and the job throws, so the queue queues it again and
//   the remaining cases play on the next claim, here after a restart or on another server.
// - A job that fails for good (its attempts used up, or its worker died on every attempt) leaves
//   the run `failed` with the job's error, by the queue's `onFailed`; reads reconcile a run whose
//   job failed without that hook running. Both end the run through `settle`, which sends
//   `simulation.run.completed` in the transaction that ends it, so the event is sent once.
//
// Starting a run is ./run-start.ts; the job, ./run-job.ts; playing a case, ./case-play.ts; its
// result row (claim, verdict, put-back), ./case-results.ts; how a run ends, ./run-settlement.ts;
// reads, ./run-reads.ts. This module wires them for one queue.

import type { Db } from '../../db/index.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import type { AgentEngine } from '../agent/engine.js';
import type { AgentService } from '../conversations/agents.js';
import type { Page } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { DeclinedTracker } from './declined.js';
import type { Judge } from './evaluation.js';
import { type RunJobDeps, type RunJobsInProcess, runJob, SIMULATION_RUN_JOB } from './run-job.js';
import { getRun, listResults, listRuns } from './run-reads.js';
import { markFailed } from './run-settlement.js';
import { createRun } from './run-start.js';

export { SIMULATION_RUN_JOB } from './run-job.js';

export interface RunnerDeps {
  db: Db;
  jobs: JobQueue;
  agents: AgentService;
  /** Makes the turn engine a run job plays its cases with, one per job (see ./index.ts). */
  newEngine: () => AgentEngine;
  declined: DeclinedTracker;
  /** The LLM judge, when a language model is configured. */
  judge?: Judge | undefined;
  concurrency: number;
  /** Webhook events: `simulation.run.completed`, sent with the run's last state. */
  emitEvent?: EmitEvent | undefined;
}

export function createRunService(deps: RunnerDeps) {
  const inProcess: RunJobsInProcess = { engines: new Set(), closed: false };
  const jobDeps: RunJobDeps = { ...deps, inProcess };
  const handler = (job: Job, ctx: JobContext) => runJob(jobDeps, job, ctx);

  deps.jobs.register(SIMULATION_RUN_JOB, handler, {
    // Its last attempt threw, or its worker died on every attempt (then no handler saw the end):
    // the run is failed with the job's error and reported, like any run that ends.
    onFailed: (job, error) => markFailed(deps, job.tenantId, String(job.payload.run_id ?? ''), error),
  });

  return {
    runJob: handler,
    getRun: (tenantId: string, runId: string) => getRun(deps, tenantId, runId),

    /**
     * Stops every run job of this process at once and for good: their turns end, the cases they
     * cut short go back to `pending`, and the jobs throw (retried by the queue). The server closes
     * it after the queue stopped, when no run job is left (src/app.ts).
     */
    async close(): Promise<void> {
      inProcess.closed = true;
      await Promise.all([...inProcess.engines].map((engine) => engine.close()));
    },

    createRun: (tenantId: string, datasetId: string, input: { agent_id?: string | undefined }) =>
      createRun(deps, tenantId, datasetId, input),
    listRuns: (tenantId: string, datasetId: string, page: Page) => listRuns(deps, tenantId, datasetId, page),
    /** Per-case results in play order: what the agent did, the verdict and why. */
    listResults: (tenantId: string, runId: string, page: Page) => listResults(deps, tenantId, runId, page),
  };
}

export type RunService = ReturnType<typeof createRunService>;
