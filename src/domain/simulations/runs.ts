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
import { sql } from 'kysely';
import type { AgentEngine } from '../../agent/engine.js';
import { conversationTraces } from '../../agent/trace-store.js';
import type { Db } from '../../db/client.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { JudgeError } from '../../lib/judge-model.js';
import { iso } from '../../lib/time.js';
import type { AgentService } from '../conversations/agents.js';
import { ConflictError, DomainError, InvalidParametersError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import { type DatasetStore, type TestCaseRow, toTestCaseRecord } from './datasets.js';
import { type CaseOutcome, evaluate, type Judge, type Verdict } from './evaluation.js';
import { inPositionOrder, type ResultRecord, type RunRecord, type TestCaseRecord, toPositionList } from './records.js';

export const SIMULATION_RUN_JOB = 'simulation.run';
/** Attempts of a run's job before the run is `failed` (a crash or a database failure each cost one). */
const RUN_MAX_ATTEMPTS = 5;
const INSERT_CHUNK = 500;
/** Names a client function may take (the conversations API's rule). */
const CLIENT_FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Input messages for which the engine took its "don't know" path. The simulations' engine is
 * given this as its knowledge-gap sink, so simulated questions never reach the knowledge-gap
 * queue and the runner learns which turns declined.
 */
export function createDeclinedTracker(max = 10_000) {
  const ids = new Set<string>();
  return {
    record(messageId: string | undefined) {
      if (!messageId) return;
      if (ids.size >= max) ids.clear();
      ids.add(messageId);
    },
    take(messageId: string | null): boolean {
      if (!messageId) return false;
      return ids.delete(messageId);
    },
  };
}
export type DeclinedTracker = ReturnType<typeof createDeclinedTracker>;

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

const toRunRecord = (row: RunRow): RunRecord => {
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

type ResultRow = {
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

const toResultRecord = (row: ResultRow): ResultRecord => {
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

const RUN_COLUMNS = [
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

export interface RunnerDeps {
  db: Db;
  jobs: JobQueue;
  agents: AgentService;
  store: DatasetStore;
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
  const { db, jobs, agents, store, declined, judge } = deps;
  /** The engines of the jobs running in this process, and whether `close()` stopped them for good. */
  const engines = new Set<AgentEngine>();
  let closed = false;

  /**
   * A run whose job failed for good but is still open (the job failed on another queue, or its
   * process stopped before `onFailed` ran) is failed now, through `settle`, so its event is sent
   * once whichever path ends it (see the module comment).
   */
  async function reconcile(tenantId: string, scope: { runId?: string; datasetId?: string }) {
    let query = db
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
      await markFailed(tenantId, row.id, message, row.finished_at ?? undefined);
    }
  }

  async function getRun(tenantId: string, runId: string): Promise<RunRecord> {
    await reconcile(tenantId, { runId });
    const row = await db
      .selectFrom('simulation_runs')
      .select(RUN_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', runId)
      .executeTakeFirst();
    if (!row) throw new NotFoundError('simulation run', runId);
    return toRunRecord(row);
  }

  /**
   * Ends a run (completed or failed) if it is still in one of `from`, and reports it to webhooks in
   * the same transaction, so the event is sent exactly when the run ends.
   */
  async function settle(
    tenantId: string,
    runId: string,
    end: { status: 'completed' } | { status: 'failed'; error_message: string },
    from: ('queued' | 'running')[],
    completedAt: Date = new Date(),
  ) {
    await db.transaction().execute(async (trx) => {
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
  async function markFailed(tenantId: string, runId: string, message: string, at: Date = new Date()) {
    await settle(tenantId, runId, { status: 'failed', error_message: message }, ['queued', 'running'], at);
  }

  // ---- playing one case ------------------------------------------------------------------

  async function enabledWorkflows(tenantId: string): Promise<Set<string>> {
    const rows = await db
      .selectFrom('workflows')
      .select('name')
      .where('tenant_id', '=', tenantId)
      .where('enabled', '=', true)
      .execute();
    return new Set(rows.map((r) => r.name));
  }

  /**
   * Plays a case: its question, then each step, in one conversation, with the case's overrides
   * answering for the tools. Overridden names that are not enabled workflows are lent to the
   * agent as client functions for the turn, so a case can exercise an application's functions.
   */
  async function playCase(
    engine: AgentEngine,
    tenantId: string,
    runId: string,
    resultId: string,
    attempt: number,
    agentId: string,
    testCase: TestCaseRecord,
  ): Promise<{ outcome: CaseOutcome; conversationId: string | undefined }> {
    const overrides = { ...testCase.api_data_overrides, ...testCase.tool_call_overrides };
    const workflows = Object.keys(overrides).length === 0 ? new Set<string>() : await enabledWorkflows(tenantId);
    const clientFunctions = Object.keys(overrides)
      .filter((name) => !workflows.has(name) && CLIENT_FUNCTION_NAME.test(name))
      .map((name) => ({ name, description: 'A function of the application, answered by the test case overrides.' }));
    const language = typeof testCase.metadata.language === 'string' ? testCase.metadata.language : undefined;
    const outcome: CaseOutcome = {
      answer: '',
      turn_status: 'COMPLETED',
      error: null,
      tool_calls: [],
      handoff: null,
      declined: false,
      citations: [],
      turns: 0,
      transcript: [],
    };
    let conversationId: string | undefined;
    for (const content of [testCase.question, ...testCase.steps.map((s) => s.content)]) {
      let message: Awaited<ReturnType<AgentEngine['runTurn']>>;
      outcome.transcript.push({ author: 'customer', content, status: null });
      try {
        const turn = await engine.sendMessage(
          tenantId,
          {
            content,
            client_functions: clientFunctions,
            client_functions_mode: 'wait',
            ...(conversationId ? { conversation_id: conversationId } : { agent_id: agentId }),
            ...(language && !conversationId ? { language } : {}),
          },
          {
            toolOverrides: overrides,
            // Marked as the run's in the conversation's own transaction: question extraction and
            // coverage never see it as a customer's, not even while its first turn plays.
            onConversationCreated: async (trx, id) => {
              await trx
                .insertInto('simulation_conversations')
                .values({ conversation_id: id, tenant_id: tenantId, run_id: runId, test_case_id: testCase.id })
                .execute();
            },
          },
        );
        if (!conversationId) {
          conversationId = turn.conversationId;
          await db
            .updateTable('simulation_results')
            .set({ conversation_id: conversationId })
            .where('tenant_id', '=', tenantId)
            .where('id', '=', resultId)
            .where('attempt', '=', attempt)
            .execute();
        }
        message = await turn.finished;
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        outcome.turn_status = 'FAILED';
        outcome.error = { code: error.code, message: error.message };
        break;
      }
      outcome.turns += 1;
      outcome.transcript.push({
        author: 'agent',
        content: message.content,
        status: message.status,
        message_id: message.id,
      });
      outcome.answer = message.content;
      outcome.turn_status = message.status;
      outcome.error = message.error;
      outcome.declined = declined.take(message.in_reply_to);
      for (const call of message.function_calls) {
        outcome.tool_calls.push({
          name: call.name,
          type: call.type,
          arguments: call.arguments,
          status: call.status,
          output: call.output,
        });
      }
      if (message.handoff)
        outcome.handoff = { agent_id: message.handoff.agent_id, agent_name: message.handoff.agent_name };
      for (const c of message.citations) {
        if (!outcome.citations.some((known) => known.document_id === c.document_id)) {
          outcome.citations.push({ document_id: c.document_id, title: c.title });
        }
      }
      if (message.status !== 'COMPLETED') break;
    }
    return { outcome, conversationId };
  }

  async function judgeCase(testCase: TestCaseRecord, outcome: CaseOutcome): Promise<Verdict> {
    try {
      return await evaluate(
        testCase.question,
        {
          expected_type: testCase.expected_type,
          expected_answer: testCase.expected_answer,
          expected_tool_name: testCase.expected_tool_name,
          expected_tool_args: testCase.expected_tool_args,
          expected_agent_id: testCase.expected_agent_id,
          expected_agent_name: testCase.expected_agent_name,
        },
        outcome,
        judge,
      );
    } catch (error) {
      if (!(error instanceof JudgeError)) throw error;
      return {
        passed: false,
        reason: error.message,
        score: null,
        evaluation: { method: 'llm_judge', rationale: null, error: error.message },
      };
    }
  }

  // ---- the job ---------------------------------------------------------------------------

  /** Claims the next case without a verdict for this attempt (see the module comment). */
  async function claimCase(tenantId: string, runId: string, attempt: number) {
    const result = await sql<{ id: string; test_case: TestCaseRecord; conversation_id: string | null }>`
      update simulation_results set status = 'running', attempt = ${attempt}, started_at = now()
      where id = (
        select id from simulation_results
        where tenant_id = ${tenantId} and run_id = ${runId}
          and (status = 'pending' or (status = 'running' and attempt < ${attempt}))
        order by position, id
        for update skip locked
        limit 1
      )
      returning id, test_case, conversation_id
    `.execute(db);
    return result.rows[0];
  }

  /** A played case's conversation, deleted with its verdict, its replay or its put-back. */
  async function deleteConversation(executor: Db, tenantId: string, conversationId: string | undefined) {
    if (!conversationId) return;
    await executor
      .deleteFrom('conversations')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', conversationId)
      .execute();
  }

  async function record(
    tenantId: string,
    runId: string,
    resultId: string,
    attempt: number,
    outcome: CaseOutcome,
    verdict: Verdict,
    conversationId: string | undefined,
  ): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      // The run is locked first: deleting its dataset locks the runs before their conversations
      // and results (./datasets.ts), so a case recorded meanwhile waits for that delete (and then
      // finds its result gone) or the delete waits for it, never both.
      await trx
        .selectFrom('simulation_runs')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', runId)
        .forNoKeyUpdate()
        .execute();
      // The simulated conversation goes with the verdict (its transcript is in the outcome), so
      // customers' conversation lists and analytics never keep it. A worker that lost its lease,
      // or whose run was deleted, deletes its own conversation too.
      // Its turns' traces are kept in the outcome: they go with the conversation.
      if (conversationId) outcome.traces = await conversationTraces(trx, tenantId, conversationId);
      await deleteConversation(trx, tenantId, conversationId);
      const updated = await trx
        .updateTable('simulation_results')
        .set({
          status: verdict.passed ? 'passed' : 'failed',
          outcome: JSON.stringify(outcome),
          reason: verdict.reason,
          score: verdict.score,
          evaluation: JSON.stringify(verdict.evaluation),
          conversation_id: null,
          completed_at: new Date(),
        })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', resultId)
        .where('status', '=', 'running')
        .where('attempt', '=', attempt)
        .returning('id')
        .executeTakeFirst();
      if (!updated) return false;
      await trx
        .updateTable('simulation_runs')
        .set((eb) =>
          verdict.passed ? { passed_tests: eb('passed_tests', '+', 1) } : { failed_tests: eb('failed_tests', '+', 1) },
        )
        .where('tenant_id', '=', tenantId)
        .where('id', '=', runId)
        .execute();
      return true;
    });
  }

  /**
   * Puts back a case whose turn the job's stop cut short: `pending` again, as if never claimed,
   * and its unfinished conversation deleted. Nothing changes if the row left this attempt.
   */
  async function putBack(tenantId: string, resultId: string, attempt: number, conversationId: string | undefined) {
    await db.transaction().execute(async (trx) => {
      await deleteConversation(trx, tenantId, conversationId);
      await trx
        .updateTable('simulation_results')
        .set({ status: 'pending', attempt: null, conversation_id: null, started_at: null })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', resultId)
        .where('status', '=', 'running')
        .where('attempt', '=', attempt)
        .execute();
    });
  }

  /** The run job: plays the run's cases with an engine of its own, closed when the job stops. */
  async function runJob(job: Job, ctx: JobContext): Promise<void> {
    if (closed) throw new Error('The simulations were shut down in this process; the run plays on its next claim.');
    const engine = deps.newEngine();
    engines.add(engine);
    const stopTurns = () => void engine.close();
    ctx.signal.addEventListener('abort', stopTurns, { once: true });
    try {
      await playRun(job, ctx, engine);
    } finally {
      ctx.signal.removeEventListener('abort', stopTurns);
      engines.delete(engine);
      await engine.close();
    }
  }

  async function playRun(job: Job, ctx: JobContext, engine: AgentEngine): Promise<void> {
    const tenantId = job.tenantId;
    const runId = String(job.payload.run_id ?? '');
    const run = await db
      .selectFrom('simulation_runs')
      .select(['id', 'status', 'agent_id', 'agent_name'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', runId)
      .executeTakeFirst();
    // Deleted with its dataset, or already settled: nothing to do.
    if (!run || run.status === 'completed' || run.status === 'failed') return;
    const agent = await agents.findAgent(tenantId, run.agent_id);
    if (!agent) {
      await markFailed(tenantId, runId, `The agent '${run.agent_name}' no longer exists.`);
      return;
    }
    await db
      .updateTable('simulation_runs')
      .set({ status: 'running', started_at: sql`coalesce(started_at, now())` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', runId)
      .where('status', 'in', ['queued', 'running'])
      .execute();

    const attempt = job.attempts;
    // The queue stopped the job, or `close()` stopped this process' simulations.
    const stopped = () => ctx.signal.aborted || closed;
    const worker = async () => {
      for (;;) {
        // Yielding between cases lets HTTP requests (reading this run, among others) be served
        // even when a case's work never has to wait for I/O.
        await new Promise((resolve) => setImmediate(resolve));
        if (stopped()) return;
        const claimed = await claimCase(tenantId, runId, attempt);
        if (!claimed) return;
        // Left by a worker that died mid-case: its unfinished conversation goes, the case is replayed.
        await deleteConversation(db, tenantId, claimed.conversation_id ?? undefined);
        const testCase = claimed.test_case;
        const { outcome, conversationId } = await playCase(
          engine,
          tenantId,
          runId,
          claimed.id,
          attempt,
          agent.id,
          testCase,
        );
        // A turn that did not complete once the job was stopped was most likely cut short by the
        // stop (its provider call aborted): the agent's failure is not the case's verdict.
        if (outcome.turn_status !== 'COMPLETED' && stopped()) {
          await putBack(tenantId, claimed.id, attempt, conversationId);
          return;
        }
        // No knowledge search slot freed in time (SEARCH_MAX_CONCURRENT): the server was busy, the
        // agent was not wrong. The case goes back, and the run's job is retried after its backoff.
        if (outcome.error?.code === 'knowledge_search_busy') {
          await putBack(tenantId, claimed.id, attempt, conversationId);
          throw new Error(`A case found no knowledge search slot free; the cases left play on the retry.`);
        }
        const verdict = await judgeCase(testCase, outcome);
        await record(tenantId, runId, claimed.id, attempt, outcome, verdict, conversationId);
        // Renews the lease now; the queue aborts `ctx.signal` if it passed to another worker.
        await ctx.heartbeat();
      }
    };
    const settled = await Promise.allSettled(Array.from({ length: Math.max(1, deps.concurrency) }, worker));
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure) throw failure.reason;
    if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('the run was interrupted');
    if (closed) throw new Error('The simulations were shut down mid-run; the cases left play on its next claim.');
    const left = await db
      .selectFrom('simulation_results')
      .select(['status', 'attempt'])
      .where('tenant_id', '=', tenantId)
      .where('run_id', '=', runId)
      .where('status', 'in', ['pending', 'running'])
      .execute();
    // Another worker took the run over (this one lost its lease): it finishes the run.
    if (left.some((r) => (r.attempt ?? 0) > attempt)) return;
    if (left.length > 0) throw new Error(`${left.length} test cases are left without a verdict`);
    await settle(tenantId, runId, { status: 'completed' }, ['running']);
  }

  jobs.register(SIMULATION_RUN_JOB, runJob, {
    // Its last attempt threw, or its worker died on every attempt (then no handler saw the end):
    // the run is failed with the job's error and reported, like any run that ends.
    onFailed: (job, error) => markFailed(job.tenantId, String(job.payload.run_id ?? ''), error),
  });

  return {
    runJob,
    getRun,

    /**
     * Stops every run job of this process at once and for good: their turns end, the cases they
     * cut short go back to `pending`, and the jobs throw (retried by the queue). The server closes
     * it after the queue stopped, when no run job is left (src/server.ts).
     */
    async close(): Promise<void> {
      closed = true;
      await Promise.all([...engines].map((engine) => engine.close()));
    },

    async createRun(tenantId: string, datasetId: string, input: { agent_id?: string | undefined }): Promise<RunRecord> {
      const dataset = await store.requireDataset(tenantId, datasetId);
      let agent: { id: string; name: string } | undefined;
      if (input.agent_id !== undefined) {
        agent = await agents.findAgent(tenantId, input.agent_id);
        if (!agent) throw new InvalidParametersError('agent_id', `No agent '${input.agent_id}' in this workspace.`);
      } else if (dataset.agent_id) {
        agent = await agents.findAgent(tenantId, dataset.agent_id);
      }
      agent ??= await agents.defaultAgent(tenantId);
      const chosen = agent;

      const runId = newId();
      // The run as this transaction commits it: read again afterwards, it may already be gone with
      // a dataset deleted meanwhile, and the request would answer 404 for an id it never sent.
      const row = await db.transaction().execute(async (trx) => {
        // The dataset row is locked so the cases read are the ones it holds now; it may have been
        // deleted since it was read (then 404, as for a run requested after the delete).
        const locked = await trx
          .selectFrom('simulation_datasets')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', datasetId)
          .forUpdate()
          .executeTakeFirst();
        if (!locked) throw new NotFoundError('simulation dataset', datasetId);
        const cases = (await store
          .selectTestCases(tenantId, trx)
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
            agent_id: chosen.id,
            agent_name: chosen.name,
            status: 'queued',
            total_tests: cases.length,
          })
          .execute();
        for (let i = 0; i < cases.length; i += INSERT_CHUNK) {
          await trx
            .insertInto('simulation_results')
            .values(
              cases.slice(i, i + INSERT_CHUNK).map((row, j) => ({
                id: newId(),
                tenant_id: tenantId,
                run_id: runId,
                test_case_id: row.id,
                // Play order: the cases' order, made dense so results list in it.
                position: i + j + 1,
                test_case: JSON.stringify(toTestCaseRecord(row)),
                status: 'pending' as const,
              })),
            )
            .execute();
        }
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
    },

    async listRuns(tenantId: string, datasetId: string, page: Page) {
      await store.requireDataset(tenantId, datasetId);
      await reconcile(tenantId, { datasetId });
      let query = db
        .selectFrom('simulation_runs')
        .select(RUN_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .where('dataset_id', '=', datasetId);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toRunRecord, (row) => row.id);
    },

    /** Per-case results in play order: what the agent did, the verdict and why. */
    async listResults(tenantId: string, runId: string, page: Page) {
      await getRun(tenantId, runId);
      let query = db
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
    },
  };
}

export type RunService = ReturnType<typeof createRunService>;
