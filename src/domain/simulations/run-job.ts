// The run job (see ./runs.ts): plays a run's cases with a turn engine of its own, a few at once,
// and completes the run when every case has its verdict.
import { sql } from 'kysely';
import type { Job, JobContext } from '../../jobs/queue.js';
import type { AgentEngine } from '../agent/engine.js';
import type { AgentService } from '../conversations/agents.js';
import { playCase } from './case-play.js';
import {
  type ClaimedCase,
  claimCase,
  deleteCaseConversation,
  judgeCase,
  putBack,
  recordVerdict,
} from './case-results.js';
import type { DeclinedTracker } from './declined.js';
import type { Judge } from './evaluation.js';
import { markFailed, type RunEndDeps, settle } from './run-settlement.js';

export const SIMULATION_RUN_JOB = 'simulation.run';

/** The engines of the run jobs playing in this process, and whether `close()` stopped them for good. */
export interface RunJobsInProcess {
  engines: Set<AgentEngine>;
  closed: boolean;
}

export interface RunJobDeps extends RunEndDeps {
  agents: AgentService;
  /** Makes the turn engine a run job plays its cases with, one per job (see ./index.ts). */
  newEngine: () => AgentEngine;
  declined: DeclinedTracker;
  /** The LLM judge, when a language model is configured. */
  judge?: Judge | undefined;
  concurrency: number;
  inProcess: RunJobsInProcess;
}

/** A run as its job plays it: under the job's attempt, against the agent, stopped when `stopped()`. */
interface RunPlay {
  tenantId: string;
  runId: string;
  attempt: number;
  agentId: string;
  stopped: () => boolean;
}

/** The run job: plays the run's cases with an engine of its own, closed when the job stops. */
export async function runJob(deps: RunJobDeps, job: Job, ctx: JobContext): Promise<void> {
  const { inProcess } = deps;
  if (inProcess.closed) {
    throw new Error('The simulations were shut down in this process; the run plays on its next claim.');
  }
  const engine = deps.newEngine();
  inProcess.engines.add(engine);
  const stopTurns = () => void engine.close();
  ctx.signal.addEventListener('abort', stopTurns, { once: true });
  try {
    await playRun(deps, job, ctx, engine);
  } finally {
    ctx.signal.removeEventListener('abort', stopTurns);
    inProcess.engines.delete(engine);
    await engine.close();
  }
}

/**
 * Marks the run `running` and returns the id of the agent it tests; nothing when there is nothing
 * to play: the run was deleted with its dataset or already settled, or its agent is gone (then it fails).
 */
async function openRun(deps: RunJobDeps, tenantId: string, runId: string): Promise<string | undefined> {
  const run = await deps.db
    .selectFrom('simulation_runs')
    .select(['id', 'status', 'agent_id', 'agent_name'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', runId)
    .executeTakeFirst();
  if (!run || run.status === 'completed' || run.status === 'failed') return undefined;
  const agent = await deps.agents.findAgent(tenantId, run.agent_id);
  if (!agent) {
    await markFailed(deps, tenantId, runId, `The agent '${run.agent_name}' no longer exists.`);
    return undefined;
  }
  await deps.db
    .updateTable('simulation_runs')
    .set({ status: 'running', started_at: sql`coalesce(started_at, now())` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', runId)
    .where('status', 'in', ['queued', 'running'])
    .execute();
  return agent.id;
}

async function playRun(deps: RunJobDeps, job: Job, ctx: JobContext, engine: AgentEngine): Promise<void> {
  const tenantId = job.tenantId;
  const runId = String(job.payload.run_id ?? '');
  const agentId = await openRun(deps, tenantId, runId);
  if (agentId === undefined) return;
  const attempt = job.attempts;
  // The queue stopped the job, or `close()` stopped this process' simulations.
  const stopped = () => ctx.signal.aborted || deps.inProcess.closed;
  const run: RunPlay = { tenantId, runId, attempt, agentId, stopped };
  const settled = await Promise.allSettled(
    Array.from({ length: Math.max(1, deps.concurrency) }, () => playCases(deps, engine, ctx, run)),
  );
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) throw failure.reason;
  if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('the run was interrupted');
  if (deps.inProcess.closed) {
    throw new Error('The simulations were shut down mid-run; the cases left play on its next claim.');
  }
  const left = await deps.db
    .selectFrom('simulation_results')
    .select(['status', 'attempt'])
    .where('tenant_id', '=', tenantId)
    .where('run_id', '=', runId)
    .where('status', 'in', ['pending', 'running'])
    .execute();
  // Another worker took the run over (this one lost its lease): it finishes the run.
  if (left.some((r) => (r.attempt ?? 0) > attempt)) return;
  if (left.length > 0) throw new Error(`${left.length} test cases are left without a verdict`);
  await settle(deps, tenantId, runId, { status: 'completed' }, ['running']);
}

/** One worker of the run: claims, plays, judges and records cases until none is left or it is stopped. */
async function playCases(deps: RunJobDeps, engine: AgentEngine, ctx: JobContext, run: RunPlay): Promise<void> {
  const { db } = deps;
  const { tenantId, runId, attempt } = run;
  for (;;) {
    // Yielding between cases lets HTTP requests (reading this run, among others) be served
    // even when a case's work never has to wait for I/O.
    await new Promise((resolve) => setImmediate(resolve));
    if (run.stopped()) return;
    const row = await claimCase(db, tenantId, runId, attempt);
    if (!row) return;
    const claimed: ClaimedCase = { tenantId, runId, resultId: row.id, attempt };
    // Left by a worker that died mid-case: its unfinished conversation goes, the case is replayed.
    await deleteCaseConversation(db, tenantId, row.conversation_id ?? undefined);
    const testCase = row.test_case;
    const { outcome, conversationId } = await playCase(
      { db, engine, declined: deps.declined },
      claimed,
      run.agentId,
      testCase,
    );
    // A turn that did not complete once the job was stopped was most likely cut short by the
    // stop (its provider call aborted): the agent's failure is not the case's verdict.
    if (outcome.turn_status !== 'COMPLETED' && run.stopped()) {
      await putBack(db, claimed, conversationId);
      return;
    }
    // No knowledge search slot freed in time (SEARCH_MAX_CONCURRENT): the server was busy, the
    // agent was not wrong. The case goes back, and the run's job is retried after its backoff.
    if (outcome.error?.code === 'knowledge_search_busy') {
      await putBack(db, claimed, conversationId);
      throw new Error(`A case found no knowledge search slot free; the cases left play on the retry.`);
    }
    const verdict = await judgeCase(deps.judge, testCase, outcome);
    await recordVerdict(db, claimed, outcome, verdict, conversationId);
    // Renews the lease now; the queue aborts `ctx.signal` if it passed to another worker.
    await ctx.heartbeat();
  }
}
