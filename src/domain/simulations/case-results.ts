// A run's result rows, one per case, as its job moves them (see ./runs.ts): claimed under a job
// attempt, judged and recorded with the run's counters, or put back `pending` when the job's stop
// cut the case short. Each write after the claim holds only while the row is still `running`
// under that attempt, so a worker that lost its lease never records a case twice.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { JudgeError } from '../../lib/judge-model.js';
import { conversationTraces } from '../agent/trace-store.js';
import { type CaseOutcome, evaluate, type Judge, type Verdict } from './evaluation.js';
import type { TestCaseRecord } from './records.js';

/** A result row as a job attempt claimed it. */
export interface ClaimedCase {
  tenantId: string;
  runId: string;
  resultId: string;
  attempt: number;
}

/** Claims the next case without a verdict for this attempt (see ./runs.ts). */
export async function claimCase(db: Db, tenantId: string, runId: string, attempt: number) {
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
export async function deleteCaseConversation(executor: Db, tenantId: string, conversationId: string | undefined) {
  if (!conversationId) return;
  await executor
    .deleteFrom('conversations')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', conversationId)
    .execute();
}

/** The case's verdict; a judge that fails fails the case with its reason, never passes it. */
export async function judgeCase(
  judge: Judge | undefined,
  testCase: TestCaseRecord,
  outcome: CaseOutcome,
): Promise<Verdict> {
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

/**
 * Records a case's verdict and counts it in its run, in one transaction; false when the row left
 * this attempt (then nothing is recorded, and only the case's conversation goes).
 */
export async function recordVerdict(
  db: Db,
  claimed: ClaimedCase,
  outcome: CaseOutcome,
  verdict: Verdict,
  conversationId: string | undefined,
): Promise<boolean> {
  const { tenantId, runId } = claimed;
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
    await deleteCaseConversation(trx, tenantId, conversationId);
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
      .where('id', '=', claimed.resultId)
      .where('status', '=', 'running')
      .where('attempt', '=', claimed.attempt)
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
export async function putBack(db: Db, claimed: ClaimedCase, conversationId: string | undefined) {
  await db.transaction().execute(async (trx) => {
    await deleteCaseConversation(trx, claimed.tenantId, conversationId);
    await trx
      .updateTable('simulation_results')
      .set({ status: 'pending', attempt: null, conversation_id: null, started_at: null })
      .where('tenant_id', '=', claimed.tenantId)
      .where('id', '=', claimed.resultId)
      .where('status', '=', 'running')
      .where('attempt', '=', claimed.attempt)
      .execute();
  });
}
