// The job of a coverage evaluation: it judges the referential's questions not yet judged, a batch
// at a time, storing each batch's verdicts and the run's progress, then totals the run by domain.
// A failed attempt keeps what it judged; the last one fails the run.
import { type Insertable, sql, type Updateable } from 'kysely';
import type { CoverageDomainResult, Database, Db } from '../../db/index.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import type { Retrieval } from '../agent/engine.js';
import { KnowledgeSearchFailure } from '../knowledge/text-search.js';
import type { EmitEvent } from '../webhooks/events.js';
import {
  EVALUATION_COLUMNS,
  type EvaluationRow,
  getEvaluationRow,
  percentage,
  toEvaluation,
} from './evaluation-records.js';
import type { CoverageJudge } from './judge.js';

export const COVERAGE_EVALUATION_JOB = 'coverage.evaluate';
/** Questions judged between two progress writes. */
const EVALUATION_BATCH = 20;

export type RetrieveFn = (tenantId: string, question: string) => Promise<Retrieval>;

export interface EvaluationRunDeps {
  db: Db;
  retrieve: RetrieveFn;
  judge?: CoverageJudge | undefined;
  /** Webhook events: `coverage.evaluation.completed`, sent with the evaluation's last state. */
  emitEvent?: EmitEvent | undefined;
}

type Run = { tenantId: string; evaluationId: string; referentialId: string };
type QuestionToJudge = { id: string; question: string; domain: string };
type Verdict = { covered: boolean; best_rank: number | null; document_id: string | null };

export function registerEvaluationJob(jobs: JobQueue, deps: EvaluationRunDeps): void {
  jobs.register(COVERAGE_EVALUATION_JOB, (job, ctx) => runEvaluation(deps, job, ctx), {
    // Every worker running it died (no catch in the run ran): the evaluation is failed, not left running.
    onFailed: async (job) => {
      const row = await getEvaluationRow(deps.db, job.tenantId, String(job.payload.evaluation_id ?? ''));
      if (row && (row.status === 'queued' || row.status === 'running')) {
        await finishEvaluation(deps, job.tenantId, row.id, {
          status: 'failed',
          error: 'The evaluation was interrupted; start another.',
        });
      }
    },
  });
}

/** The job: judge every not-yet-judged question, batch by batch, then total the run. */
async function runEvaluation(deps: EvaluationRunDeps, job: Job, ctx: JobContext): Promise<void> {
  const { db } = deps;
  const tenantId = job.tenantId;
  const evaluationId = String(job.payload.evaluation_id ?? '');
  const started = await db
    .updateTable('coverage_evaluations')
    .set({ status: 'running', started_at: sql`coalesce(started_at, now())`, error: null, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', evaluationId)
    .where('status', 'in', ['queued', 'running'])
    .returning(['referential_id'])
    .executeTakeFirst();
  if (!started) return; // deleted with its referential, or already finished
  const run: Run = { tenantId, evaluationId, referentialId: started.referential_id };
  try {
    for (;;) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('the job was stopped');
      const questions = await unjudgedQuestions(db, run);
      if (questions.length === 0) break;
      await judgeBatch(deps, run, questions, ctx.signal);
      await writeProgress(db, tenantId, evaluationId);
      await ctx.heartbeat();
    }
    await finishEvaluation(deps, tenantId, evaluationId, { status: 'completed', referentialId: run.referentialId });
  } catch (error) {
    await recordFailedAttempt(deps, job, evaluationId, error);
    throw error;
  }
}

/** The next batch of the referential's questions that have no result in this run yet, by id. */
function unjudgedQuestions(db: Db, { tenantId, evaluationId, referentialId }: Run): Promise<QuestionToJudge[]> {
  return db
    .selectFrom('coverage_questions as q')
    .select(['q.id', 'q.question', 'q.domain'])
    .where('q.tenant_id', '=', tenantId)
    .where('q.referential_id', '=', referentialId)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('coverage_results as r')
            .select('r.question_id')
            .where('r.tenant_id', '=', tenantId)
            .where('r.evaluation_id', '=', evaluationId)
            .whereRef('r.question_id', '=', 'q.id'),
        ),
      ),
    )
    .orderBy('q.id')
    .limit(EVALUATION_BATCH)
    .execute();
}

/** Judges a batch and stores its verdicts together. */
async function judgeBatch(deps: EvaluationRunDeps, run: Run, questions: QuestionToJudge[], signal: AbortSignal) {
  const results: Insertable<Database['coverage_results']>[] = [];
  const save = async () => {
    if (results.length === 0) return;
    await deps.db
      .insertInto('coverage_results')
      .values(results)
      .onConflict((oc) => oc.columns(['evaluation_id', 'question_id']).doNothing())
      .execute();
  };
  for (const q of questions) {
    let verdict: Verdict;
    try {
      verdict = await judgeQuestion(deps, run.tenantId, q.question, signal);
    } catch (error) {
      // The questions judged before this one are kept: the retry starts after them.
      await save().catch(() => {});
      throw error;
    }
    results.push({
      evaluation_id: run.evaluationId,
      tenant_id: run.tenantId,
      question_id: q.id,
      question: q.question,
      domain: q.domain,
      ...verdict,
    });
  }
  await save();
}

/** Is one question covered? Its best passage's rank and document either way. */
async function judgeQuestion(
  { retrieve, judge }: EvaluationRunDeps,
  tenantId: string,
  question: string,
  signal: AbortSignal,
): Promise<Verdict> {
  let retrieval: Retrieval;
  try {
    retrieval = await retrieve(tenantId, question);
  } catch (error) {
    // The search runs past SEARCH_TIMEOUT_MS on every try: a customer asking this gets no
    // answer either (the turn ends FAILED), so it is not covered; failing the run would fail it
    // on every attempt. No slot free (busy) is transient: the attempt is retried.
    if (error instanceof KnowledgeSearchFailure && error.code === 'knowledge_search_timeout') {
      return { covered: false, best_rank: null, document_id: null };
    }
    throw error;
  }
  const best = retrieval.passages[0];
  if (!best) return { covered: false, best_rank: null, document_id: null };
  const covered = judge ? await judge.answers(question, retrieval.passages, signal) : true;
  return { covered, best_rank: best.rank, document_id: best.document_id };
}

/** A failed attempt: the last one fails the run; an earlier one notes the error and is retried. */
async function recordFailedAttempt(deps: EvaluationRunDeps, job: Job, evaluationId: string, error: unknown) {
  const final = job.attempts >= job.maxAttempts;
  const reason = error instanceof Error ? error.message : String(error);
  if (final) {
    await finishEvaluation(deps, job.tenantId, evaluationId, {
      status: 'failed',
      error: `The evaluation failed: ${reason}`,
    });
  } else {
    await deps.db
      .updateTable('coverage_evaluations')
      .set({ error: `Attempt ${job.attempts} failed (${reason}); retrying.`, updated_at: sql`now()` })
      .where('tenant_id', '=', job.tenantId)
      .where('id', '=', evaluationId)
      .execute();
  }
}

/**
 * Ends an evaluation and reports it to webhooks in the same transaction. A completed one is
 * totalled there (see `completedTotals`).
 */
async function finishEvaluation(
  { db, emitEvent }: Pick<EvaluationRunDeps, 'db' | 'emitEvent'>,
  tenantId: string,
  evaluationId: string,
  end: { status: 'completed'; referentialId: string } | { status: 'failed'; error: string },
) {
  await db.transaction().execute(async (trx) => {
    const outcome: Updateable<Database['coverage_evaluations']> =
      end.status === 'completed' ? await completedTotals(trx, tenantId, evaluationId, end.referentialId) : end;
    const row = (await trx
      .updateTable('coverage_evaluations')
      .set({ ...outcome, completed_at: sql`now()`, updated_at: sql`now()` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', evaluationId)
      .returning(EVALUATION_COLUMNS)
      .executeTakeFirst()) as EvaluationRow | undefined;
    if (row && emitEvent) {
      await emitEvent(trx, tenantId, 'coverage.evaluation.completed', { evaluation: toEvaluation(row) });
    }
  });
}

/**
 * A completed run's totals, by the domains its questions are in at that moment: a domain renamed
 * while the run judged (some results written under the old name, some under the new) is one
 * domain in its report, the referential's, not two. The referential is held until the
 * transaction ends, so a rename waits.
 */
async function completedTotals(
  trx: Db,
  tenantId: string,
  evaluationId: string,
  referentialId: string,
): Promise<Updateable<Database['coverage_evaluations']>> {
  await trx
    .selectFrom('coverage_referentials')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', referentialId)
    .forShare()
    .execute();
  await sql`
    update coverage_results r set domain = q.domain
    from coverage_questions q
    where r.tenant_id = ${tenantId} and r.evaluation_id = ${evaluationId}
      and q.tenant_id = r.tenant_id and q.id = r.question_id and r.domain <> q.domain`.execute(trx);
  const domains = await domainResults(trx, tenantId, evaluationId);
  const total = domains.reduce((n, d) => n + d.total, 0);
  return {
    status: 'completed',
    total_questions: total,
    processed_questions: total,
    covered_questions: domains.reduce((n, d) => n + d.covered, 0),
    domains: JSON.stringify(domains),
  };
}

async function writeProgress(db: Db, tenantId: string, evaluationId: string) {
  await sql`
    update coverage_evaluations e set
      processed_questions = r.processed, covered_questions = r.covered,
      total_questions = greatest(e.total_questions, r.processed), updated_at = now()
    from (
      select count(*)::int as processed, (count(*) filter (where covered))::int as covered
      from coverage_results where tenant_id = ${tenantId} and evaluation_id = ${evaluationId}
    ) r
    where e.tenant_id = ${tenantId} and e.id = ${evaluationId}
  `.execute(db);
}

async function domainResults(executor: Db, tenantId: string, evaluationId: string): Promise<CoverageDomainResult[]> {
  const rows = await executor
    .selectFrom('coverage_results')
    .select([
      'domain',
      sql<number>`(count(*) filter (where covered))::int`.as('covered'),
      sql<number>`count(*)::int`.as('total'),
    ])
    .where('tenant_id', '=', tenantId)
    .where('evaluation_id', '=', evaluationId)
    .groupBy('domain')
    .orderBy('domain')
    .execute();
  return rows.map((r) => ({
    domain: r.domain,
    covered: Number(r.covered),
    total: Number(r.total),
    percentage: percentage(Number(r.covered), Number(r.total)),
  }));
}
