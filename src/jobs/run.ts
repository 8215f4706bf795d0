// Running a claimed job: its handler under a lease renewed on a timer, then success, retry or
// failure written; and at stop, a grace period for the handlers running before they are aborted.
import { type JobOutcome, recordJob } from '../observability/metrics.js';
import { withSpan } from '../observability/tracing.js';
import { describe } from './errors.js';
import { heartbeat } from './lease.js';
import { complete, fail, release } from './outcomes.js';
import type { QueueState } from './state.js';
import type { Claim, Job } from './types.js';

/** Runs one claimed job to its end: handler, lease renewal, then success, retry or failure. */
export async function runJob(state: QueueState, claimed: Claim): Promise<void> {
  const { db, cfg, log } = state;
  const { job } = claimed;
  const abort = new AbortController();
  const handler = state.handlers.get(job.kind);
  const renew = async () => {
    if (abort.signal.aborted) return;
    if (!(await heartbeat(db, cfg.leaseMs, claimed))) abort.abort(new Error('the job lease passed to another worker'));
  };
  const timer = setInterval(
    () => {
      renew().catch((error) => state.warnFailed({ job_id: job.id }, 'job heartbeat failed', error));
    },
    Math.max(Math.floor(cfg.leaseMs / 3), 10),
  );
  timer.unref();
  const entry = { abort, promise: Promise.resolve(), lane: state.laneOf(job.kind), tenantId: job.tenantId };
  state.running.set(job.id, entry);
  const started = performance.now();
  const ended = (outcome: JobOutcome) => recordJob(job.kind, outcome, (performance.now() - started) / 1000);
  try {
    if (job.attempts > job.maxAttempts) {
      // Its worker died on every attempt (the lease expired each time): stop trying.
      const error = new Error('the job was interrupted on every attempt (its worker stopped responding)');
      if ((await fail(db, cfg, claimed, error)) === 'failed') await failedForGood(state, job, error);
      return;
    }
    try {
      if (!handler) throw new Error(`no handler for job kind '${job.kind}'`);
      await withSpan(
        `job ${job.kind}`,
        { 'workspace.job_kind': job.kind, 'workspace.job_id': job.id, 'workspace.tenant_id': job.tenantId },
        () => handler(job, { heartbeat: renew, signal: abort.signal }),
        { root: true },
      );
    } catch (error) {
      clearInterval(timer);
      await endFailedRun(state, claimed, error, abort.signal, ended);
      return;
    }
    clearInterval(timer);
    const completed = await complete(db, claimed);
    ended(completed ? 'succeeded' : 'lost');
    if (!completed) log.warn({ job_id: job.id }, 'job finished after its lease passed on');
  } finally {
    clearInterval(timer);
    state.running.delete(job.id);
  }
}

/**
 * A handler that threw: stopped by its worker (`signal` aborted), the job goes back to the queue;
 * else the run failed, retried or failed for good.
 */
async function endFailedRun(
  state: QueueState,
  claimed: Claim,
  error: unknown,
  signal: AbortSignal,
  ended: (outcome: JobOutcome) => void,
): Promise<void> {
  const { db, cfg, log } = state;
  const { job } = claimed;
  if (signal.aborted) {
    ended('stopped');
    if (await release(db, claimed, error)) log.info({ job_id: job.id, kind: job.kind }, 'job stopped; queued again');
    return;
  }
  const outcome = await fail(db, cfg, claimed, error);
  ended(outcome);
  const fields = { job_id: job.id, kind: job.kind, attempt: job.attempts, err: describe(error) };
  if (outcome === 'failed') {
    log.error(fields, 'job failed for good');
    await failedForGood(state, job, error);
  } else if (outcome === 'retry') log.warn(fields, 'job failed; will retry');
}

async function failedForGood(state: QueueState, job: Job, error: unknown): Promise<void> {
  const hook = state.kindOptions.get(job.kind)?.onFailed;
  if (!hook) return;
  try {
    await hook(job, describe(error));
  } catch (hookError) {
    state.log.error({ job_id: job.id, err: describe(hookError) }, 'job failure hook failed');
  }
}

/** Waits for the running handlers, aborting them once the grace period (`stopGraceMs`) is over. */
export async function stopRunning(state: QueueState): Promise<void> {
  const all = () => Promise.all([...state.running.values()].map((r) => r.promise));
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), state.cfg.stopGraceMs);
    timer.unref();
  });
  const outcome = await Promise.race([all().then(() => 'done' as const), graceOver]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    for (const r of state.running.values()) r.abort.abort(new Error('the server is stopping'));
    await all();
  }
}
