// Coverage evaluations (DESIGN.md §7, §8): a run puts every reference question of a referential
// to the agent's own retrieval (the engine's `retrieve`, the function a customer turn uses) and
// records whether the knowledge answers it:
// - built-in rule: covered when retrieval returns a passage at or above the agent's rank
//   threshold (the threshold the engine answers at; below it the agent records a knowledge gap);
// - with an LLM configured: a question with such passages is covered when the model, shown the
//   question and its best passages, says they answer it; without passages it is not covered.
// Runs go through the durable job queue. Judged questions are stored in batches, so progress is
// readable while the run goes and a retried job resumes after the questions already judged.
// `GET /coverage` reads the latest completed run.
import { type Insertable, sql, type Updateable } from 'kysely';
import type { Retrieval } from '../../agent/engine.js';
import type { Db } from '../../db/client.js';
import type { CoverageDomainResult, CoverageRunStatus, Database } from '../../db/schema.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { KnowledgeSearchFailure } from '../knowledge/text-search.js';
import { decodeIdCursor, type List, newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { CoverageJudge } from './judge.js';
import { requireReferential } from './referentials.js';

export const COVERAGE_EVALUATION_JOB = 'coverage.evaluate';
/** Questions judged between two progress writes. */
const EVALUATION_BATCH = 20;

export type RetrieveFn = (tenantId: string, question: string) => Promise<Retrieval>;

export interface Percentages {
  covered: number;
  total: number;
  /** covered / total × 100, one decimal; null when there is no question. */
  percentage: number | null;
}

export interface EvaluationRecord extends Percentages {
  id: string;
  object: 'coverage_evaluation';
  referential_id: string;
  status: CoverageRunStatus;
  method: 'rank_threshold' | 'llm_judge';
  threshold: number;
  processed: number;
  domains: CoverageDomainResult[];
  error: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
}

export interface CoverageRecord {
  object: 'coverage';
  /** False until a run of the tenant (or of the asked referential) has completed. */
  has_evaluation: boolean;
  evaluation_id: string | null;
  referential_id: string | null;
  completed_at: string | null;
  method: 'rank_threshold' | 'llm_judge' | null;
  domains: CoverageDomainResult[];
  overall: Percentages | null;
}

export interface ResultRecord {
  object: 'coverage_result';
  question_id: string;
  question: string;
  domain: string;
  covered: boolean;
  best_rank: number | null;
  document_id: string | null;
}

export const percentage = (covered: number, total: number): number | null =>
  total === 0 ? null : Math.round((covered / total) * 1000) / 10;

type EvaluationRow = {
  id: string;
  referential_id: string;
  status: CoverageRunStatus;
  method: 'rank_threshold' | 'llm_judge';
  threshold: number;
  total_questions: number;
  processed_questions: number;
  covered_questions: number;
  domains: CoverageDomainResult[];
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
};

const toEvaluation = (row: EvaluationRow): EvaluationRecord => ({
  id: row.id,
  object: 'coverage_evaluation',
  referential_id: row.referential_id,
  status: row.status,
  method: row.method,
  threshold: Number(row.threshold),
  processed: row.processed_questions,
  covered: row.covered_questions,
  total: row.total_questions,
  percentage: row.status === 'completed' ? percentage(row.covered_questions, row.total_questions) : null,
  domains: row.domains,
  error: row.error,
  created_at: iso(row.created_at),
  started_at: iso(row.started_at),
  completed_at: iso(row.completed_at),
});

const EVALUATION_COLUMNS = [
  'id',
  'referential_id',
  'status',
  'method',
  'threshold',
  'total_questions',
  'processed_questions',
  'covered_questions',
  'domains',
  'error',
  'created_at',
  'started_at',
  'completed_at',
] as const;

export interface EvaluationServiceDeps {
  db: Db;
  jobs: JobQueue;
  retrieve: RetrieveFn;
  /** The rank threshold the agent answers at, reported on each run. */
  threshold: number;
  judge?: CoverageJudge | undefined;
  /** Webhook events: `coverage.evaluation.completed`, sent with the evaluation's last state. */
  emitEvent?: EmitEvent | undefined;
}

export function createEvaluationService(deps: EvaluationServiceDeps) {
  const { db, jobs, retrieve, judge } = deps;

  async function getRow(tenantId: string, id: string): Promise<EvaluationRow | undefined> {
    return (await db
      .selectFrom('coverage_evaluations')
      .select(EVALUATION_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst()) as EvaluationRow | undefined;
  }

  /** Is one question covered? Its best passage's rank and document either way. */
  async function judgeQuestion(tenantId: string, question: string, signal: AbortSignal) {
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

  /** The job: judge every not-yet-judged question, batch by batch, then total the run. */
  async function runEvaluation(job: Job, ctx: JobContext): Promise<void> {
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
    const referentialId = started.referential_id;
    try {
      for (;;) {
        if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('the job was stopped');
        const questions = await db
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
        if (questions.length === 0) break;
        const results: Insertable<Database['coverage_results']>[] = [];
        const save = async () => {
          if (results.length === 0) return;
          await db
            .insertInto('coverage_results')
            .values(results)
            .onConflict((oc) => oc.columns(['evaluation_id', 'question_id']).doNothing())
            .execute();
        };
        for (const q of questions) {
          let verdict: Awaited<ReturnType<typeof judgeQuestion>>;
          try {
            verdict = await judgeQuestion(tenantId, q.question, ctx.signal);
          } catch (error) {
            // The questions judged before this one are kept: the retry starts after them.
            await save().catch(() => {});
            throw error;
          }
          results.push({
            evaluation_id: evaluationId,
            tenant_id: tenantId,
            question_id: q.id,
            question: q.question,
            domain: q.domain,
            ...verdict,
          });
        }
        await save();
        await writeProgress(tenantId, evaluationId);
        await ctx.heartbeat();
      }
      await finish(tenantId, evaluationId, { status: 'completed', referentialId });
    } catch (error) {
      const final = job.attempts >= job.maxAttempts;
      const reason = error instanceof Error ? error.message : String(error);
      if (final) {
        await finish(tenantId, evaluationId, { status: 'failed', error: `The evaluation failed: ${reason}` });
      } else {
        await db
          .updateTable('coverage_evaluations')
          .set({ error: `Attempt ${job.attempts} failed (${reason}); retrying.`, updated_at: sql`now()` })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', evaluationId)
          .execute();
      }
      throw error;
    }
  }

  /**
   * Ends an evaluation and reports it to webhooks in the same transaction. A completed one is
   * totalled there, by the domains its questions are in at that moment: a domain renamed while the
   * run judged (some results written under the old name, some under the new) is one domain in its
   * report, the referential's, not two. The referential is held meanwhile, so a rename waits.
   */
  async function finish(
    tenantId: string,
    evaluationId: string,
    end: { status: 'completed'; referentialId: string } | { status: 'failed'; error: string },
  ) {
    await db.transaction().execute(async (trx) => {
      let outcome: Updateable<Database['coverage_evaluations']> = end;
      if (end.status === 'completed') {
        await trx
          .selectFrom('coverage_referentials')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', end.referentialId)
          .forShare()
          .execute();
        await sql`
          update coverage_results r set domain = q.domain
          from coverage_questions q
          where r.tenant_id = ${tenantId} and r.evaluation_id = ${evaluationId}
            and q.tenant_id = r.tenant_id and q.id = r.question_id and r.domain <> q.domain`.execute(trx);
        const domains = await domainResults(trx, tenantId, evaluationId);
        const total = domains.reduce((n, d) => n + d.total, 0);
        outcome = {
          status: 'completed',
          total_questions: total,
          processed_questions: total,
          covered_questions: domains.reduce((n, d) => n + d.covered, 0),
          domains: JSON.stringify(domains),
        };
      }
      const row = (await trx
        .updateTable('coverage_evaluations')
        .set({ ...outcome, completed_at: sql`now()`, updated_at: sql`now()` })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', evaluationId)
        .returning(EVALUATION_COLUMNS)
        .executeTakeFirst()) as EvaluationRow | undefined;
      if (row && deps.emitEvent) {
        await deps.emitEvent(trx, tenantId, 'coverage.evaluation.completed', { evaluation: toEvaluation(row) });
      }
    });
  }

  async function writeProgress(tenantId: string, evaluationId: string) {
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

  jobs.register(COVERAGE_EVALUATION_JOB, runEvaluation, {
    // Every worker running it died (no catch above ran): the evaluation is failed, not left running.
    onFailed: async (job) => {
      const row = await getRow(job.tenantId, String(job.payload.evaluation_id ?? ''));
      if (row && (row.status === 'queued' || row.status === 'running')) {
        await finish(job.tenantId, row.id, {
          status: 'failed',
          error: 'The evaluation was interrupted; start another.',
        });
      }
    },
  });

  return {
    async startEvaluation(tenantId: string, input: { referential_id: string }): Promise<EvaluationRecord> {
      return db.transaction().execute(async (trx) => {
        const referentialId = await requireReferential(trx, tenantId, input.referential_id, { from: 'body' });
        const total = await trx
          .selectFrom('coverage_questions')
          .select(sql<number>`count(*)::int`.as('n'))
          .where('tenant_id', '=', tenantId)
          .where('referential_id', '=', referentialId)
          .executeTakeFirstOrThrow();
        const row = (await trx
          .insertInto('coverage_evaluations')
          .values({
            id: newId(),
            tenant_id: tenantId,
            referential_id: referentialId,
            method: judge ? 'llm_judge' : 'rank_threshold',
            threshold: deps.threshold,
            total_questions: Number(total.n),
          })
          .returning(EVALUATION_COLUMNS)
          .executeTakeFirstOrThrow()) as EvaluationRow;
        await jobs.enqueue(trx, {
          kind: COVERAGE_EVALUATION_JOB,
          tenantId,
          payload: { evaluation_id: row.id },
          maxAttempts: 3,
        });
        return toEvaluation(row);
      });
    },

    async getEvaluation(tenantId: string, id: string): Promise<EvaluationRecord> {
      const row = await getRow(tenantId, id);
      if (!row) throw new NotFoundError('evaluation', id);
      return toEvaluation(row);
    },

    async listEvaluations(tenantId: string, page: Page): Promise<List<EvaluationRecord>> {
      let query = db.selectFrom('coverage_evaluations').select(EVALUATION_COLUMNS).where('tenant_id', '=', tenantId);
      query = newestFirst(query, page);
      return toList((await query.execute()) as EvaluationRow[], page, toEvaluation, (row) => row.id);
    },

    /** Per-question results of a run, in question order (cursor: the last question id). */
    async listResults(tenantId: string, id: string, page: Page & { covered?: boolean | undefined }) {
      if (!(await getRow(tenantId, id))) throw new NotFoundError('evaluation', id);
      let query = db
        .selectFrom('coverage_results')
        .select(['question_id', 'question', 'domain', 'covered', 'best_rank', 'document_id'])
        .where('tenant_id', '=', tenantId)
        .where('evaluation_id', '=', id)
        .orderBy('question_id')
        .limit(page.limit + 1);
      if (page.covered !== undefined) query = query.where('covered', '=', page.covered);
      const after = decodeIdCursor(page.cursor);
      if (after) query = query.where('question_id', '>', after);
      return toList(
        await query.execute(),
        page,
        (row): ResultRecord => ({
          object: 'coverage_result',
          question_id: row.question_id,
          question: row.question,
          domain: row.domain,
          covered: row.covered,
          best_rank: row.best_rank === null ? null : Number(row.best_rank),
          document_id: row.document_id,
        }),
        (row) => row.question_id,
      );
    },

    /** Per-domain percentages of the latest completed run (of the referential, when named). */
    async latestCoverage(tenantId: string, options: { referential_id?: string | undefined } = {}) {
      let query = db
        .selectFrom('coverage_evaluations')
        .select(EVALUATION_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .where('status', '=', 'completed')
        .orderBy('completed_at', 'desc')
        .orderBy('id', 'desc')
        .limit(1);
      if (options.referential_id !== undefined) query = query.where('referential_id', '=', options.referential_id);
      const row = (await query.executeTakeFirst()) as EvaluationRow | undefined;
      if (!row) {
        return {
          object: 'coverage',
          has_evaluation: false,
          evaluation_id: null,
          referential_id: options.referential_id ?? null,
          completed_at: null,
          method: null,
          domains: [],
          overall: null,
        } satisfies CoverageRecord;
      }
      return {
        object: 'coverage',
        has_evaluation: true,
        evaluation_id: row.id,
        referential_id: row.referential_id,
        completed_at: iso(row.completed_at),
        method: row.method,
        domains: row.domains,
        overall: {
          covered: row.covered_questions,
          total: row.total_questions,
          percentage: percentage(row.covered_questions, row.total_questions),
        },
      } satisfies CoverageRecord;
    },
  };
}

export type EvaluationService = ReturnType<typeof createEvaluationService>;
