// Question extraction (DESIGN.md §7): reads the tenant's conversations, takes the questions
// customers asked (their own messages, question-like sentences), drops near-duplicates (of each
// other and of the referential's questions), files each under the closest existing domain or
// `uncategorized`, and adds them to the referential. The text rules are in text.ts.
//
// A run covers the conversations started up to its creation (`cutoff_at`), in id order, one
// batch per job: each job processes a batch in one transaction (questions added and progress
// advanced together) and enqueues the job of the next batch. So progress is live and durable,
// and a run survives restarts. A job carries the cursor it expects; one that finds the run
// moved past it (a retry of a batch that did commit) does nothing, so no batch is done twice.
import { sql } from 'kysely';
import type { Db } from '../../db/client.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { CoverageRunStatus } from '../../db/schema.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { ConflictError } from '../errors.js';
import { requireReferential } from './referentials.js';
import { closestDomain, contentWords, extractQuestions, isNearDuplicate } from './text.js';

export const COVERAGE_EXTRACTION_JOB = 'coverage.extract';
export const DEFAULT_EXTRACTION_BATCH = 50;

export interface ExtractionRecord {
  object: 'question_extraction';
  /** Null when the workspace never ran an extraction (status `never_run`). */
  id: string | null;
  referential_id: string | null;
  status: CoverageRunStatus | 'never_run';
  total_conversations: number;
  processed_conversations: number;
  /** Customer questions read in the processed conversations, before near-duplicates are dropped. */
  questions_found: number;
  /** Questions added to the referential. */
  questions_added: number;
  /** processed / total × 100, one decimal (100 once completed). */
  percent: number;
  error: string | null;
  created_at: string | null;
  started_at: string | null;
  finished_at: string | null;
}

type ExtractionRow = {
  id: string;
  referential_id: string;
  status: CoverageRunStatus;
  total_conversations: number;
  processed_conversations: number;
  questions_found: number;
  questions_added: number;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
};

const EXTRACTION_COLUMNS = [
  'id',
  'referential_id',
  'status',
  'total_conversations',
  'processed_conversations',
  'questions_found',
  'questions_added',
  'error',
  'created_at',
  'started_at',
  'finished_at',
] as const;

function toExtraction(row: ExtractionRow): ExtractionRecord {
  const total = row.total_conversations;
  const done = row.status === 'completed';
  return {
    object: 'question_extraction',
    id: row.id,
    referential_id: row.referential_id,
    status: row.status,
    total_conversations: total,
    processed_conversations: row.processed_conversations,
    questions_found: row.questions_found,
    questions_added: row.questions_added,
    percent:
      done || total === 0
        ? done
          ? 100
          : 0
        : Math.min(100, Math.floor((row.processed_conversations / total) * 1000) / 10),
    error: row.error,
    created_at: iso(row.created_at),
    started_at: iso(row.started_at),
    finished_at: iso(row.finished_at),
  };
}

const NEVER_RUN: ExtractionRecord = {
  object: 'question_extraction',
  id: null,
  referential_id: null,
  status: 'never_run',
  total_conversations: 0,
  processed_conversations: 0,
  questions_found: 0,
  questions_added: 0,
  percent: 0,
  error: null,
  created_at: null,
  started_at: null,
  finished_at: null,
};

export interface ExtractionServiceDeps {
  db: Db;
  jobs: JobQueue;
  /** Conversations read per job (one progress step). */
  batchSize?: number;
}

/**
 * The conversations a run reads: the workspace's, started by the cutoff, and a customer's: those a
 * simulation run holds with the agent are kept out of what describes customers (docs/simulations.md).
 */
function customerConversations(db: Db, tenantId: string, cutoff: Date) {
  return db
    .selectFrom('conversations')
    .where('tenant_id', '=', tenantId)
    .where('created_at', '<=', cutoff)
    .where(isCustomerConversation(tenantId, 'id'));
}

export function createExtractionService(deps: ExtractionServiceDeps) {
  const { db, jobs } = deps;
  const batchSize = deps.batchSize ?? DEFAULT_EXTRACTION_BATCH;

  /** One batch: read conversations after the cursor, add their new questions, advance, chain. */
  async function runBatch(job: Job, _ctx: JobContext): Promise<void> {
    const tenantId = job.tenantId;
    const extractionId = String(job.payload.extraction_id ?? '');
    const expectedCursor = (job.payload.cursor as string | null | undefined) ?? null;
    try {
      await db.transaction().execute(async (trx) => {
        // The referential is locked first, so a concurrent rename or batch add waits for this
        // batch; then the run. The referential's delete takes them in this order too (the
        // referential, then its runs by cascade): the other order deadlocked with it.
        const owner = await trx
          .selectFrom('coverage_extractions')
          .select('referential_id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', extractionId)
          .executeTakeFirst();
        if (!owner) return; // gone with its referential
        await trx
          .selectFrom('coverage_referentials')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('id', '=', owner.referential_id)
          .forUpdate()
          .executeTakeFirst();
        const run = await trx
          .selectFrom('coverage_extractions')
          .select(['id', 'referential_id', 'status', 'last_conversation_id', 'cutoff_at'])
          .where('tenant_id', '=', tenantId)
          .where('id', '=', extractionId)
          .forUpdate()
          .executeTakeFirst();
        // Gone with its referential, finished, or already past this job's batch.
        if (!run || (run.status !== 'queued' && run.status !== 'running')) return;
        if (run.last_conversation_id !== expectedCursor) return;

        let conversationsQuery = customerConversations(trx, tenantId, run.cutoff_at)
          .select('id')
          .orderBy('id')
          .limit(batchSize);
        if (run.last_conversation_id)
          conversationsQuery = conversationsQuery.where('id', '>', run.last_conversation_id);
        const conversationIds = (await conversationsQuery.execute()).map((c) => c.id);
        const last = conversationIds[conversationIds.length - 1];

        const messages =
          conversationIds.length === 0
            ? []
            : await trx
                .selectFrom('messages')
                .select(['id', 'conversation_id', 'content'])
                .where('tenant_id', '=', tenantId)
                .where('conversation_id', 'in', conversationIds)
                .where('role', '=', 'user')
                .where('author', '=', 'customer')
                .where('hidden', '=', false)
                .orderBy('conversation_id')
                .orderBy('created_at')
                .orderBy('id')
                .execute();

        // The referential as it stands: its questions' words, and each domain's vocabulary.
        const existing = await trx
          .selectFrom('coverage_questions')
          .select(['question', 'domain'])
          .where('tenant_id', '=', tenantId)
          .where('referential_id', '=', run.referential_id)
          .execute();
        const known = existing.map((q) => contentWords(q.question));
        const domains = new Map<string, { domain: string; vocabulary: Set<string>; questionCount: number }>();
        existing.forEach((q, i) => {
          const entry = domains.get(q.domain) ?? { domain: q.domain, vocabulary: new Set(), questionCount: 0 };
          for (const word of known[i] ?? []) entry.vocabulary.add(word);
          entry.questionCount += 1;
          domains.set(q.domain, entry);
        });
        const domainList = [...domains.values()];

        let found = 0;
        const added: {
          id: string;
          tenant_id: string;
          referential_id: string;
          question: string;
          domain: string;
          origin: 'extracted';
          conversation_id: string;
          message_id: string;
        }[] = [];
        for (const message of messages) {
          for (const question of extractQuestions(message.content)) {
            found += 1;
            const words = contentWords(question);
            if (words.size === 0 || known.some((other) => isNearDuplicate(words, other))) continue;
            known.push(words);
            added.push({
              id: newId(),
              tenant_id: tenantId,
              referential_id: run.referential_id,
              question,
              domain: closestDomain(words, domainList),
              origin: 'extracted',
              conversation_id: message.conversation_id,
              message_id: message.id,
            });
          }
        }
        if (added.length > 0) {
          await trx.insertInto('coverage_questions').values(added).execute();
          await trx
            .updateTable('coverage_referentials')
            .set({ updated_at: sql`now()` })
            .where('tenant_id', '=', tenantId)
            .where('id', '=', run.referential_id)
            .execute();
        }

        const finished = conversationIds.length < batchSize;
        await trx
          .updateTable('coverage_extractions')
          .set({
            status: finished ? 'completed' : 'running',
            started_at: sql`coalesce(started_at, now())`,
            ...(finished ? { finished_at: sql`now()` } : {}),
            processed_conversations: sql`processed_conversations + ${conversationIds.length}`,
            questions_found: sql`questions_found + ${found}`,
            questions_added: sql`questions_added + ${added.length}`,
            ...(last ? { last_conversation_id: last } : {}),
            error: null,
            updated_at: sql`now()`,
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', extractionId)
          .execute();
        if (!finished && last) {
          await jobs.enqueue(trx, {
            kind: COVERAGE_EXTRACTION_JOB,
            tenantId,
            payload: { extraction_id: extractionId, cursor: last },
            maxAttempts: 3,
          });
        }
      });
    } catch (error) {
      const final = job.attempts >= job.maxAttempts;
      const reason = error instanceof Error ? error.message : String(error);
      await db
        .updateTable('coverage_extractions')
        .set({
          ...(final ? { status: 'failed' as const, finished_at: sql`now()` } : {}),
          error: final ? `The extraction failed: ${reason}` : `A batch failed (${reason}); retrying.`,
          updated_at: sql`now()`,
        })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', extractionId)
        .where('status', 'in', ['queued', 'running'])
        .execute();
      throw error;
    }
  }

  jobs.register(COVERAGE_EXTRACTION_JOB, runBatch, {
    // Every worker running a batch died (no catch above ran): the run is failed, so it neither
    // reads as running for ever nor blocks the next run (one active run per workspace).
    onFailed: async (job) => {
      await db
        .updateTable('coverage_extractions')
        .set({
          status: 'failed',
          finished_at: sql`now()`,
          error: 'The extraction was interrupted; start another run.',
          updated_at: sql`now()`,
        })
        .where('tenant_id', '=', job.tenantId)
        .where('id', '=', String(job.payload.extraction_id ?? ''))
        .where('status', 'in', ['queued', 'running'])
        .execute();
    },
  });

  return {
    /** Queues a run over the conversations started so far; one run at a time per workspace. */
    async startExtraction(tenantId: string, input: { referential_id: string }): Promise<ExtractionRecord> {
      try {
        return await db.transaction().execute(async (trx) => {
          const referentialId = await requireReferential(trx, tenantId, input.referential_id, { from: 'body' });
          const cutoff = await sql<{ now: Date }>`select now() as now`.execute(trx);
          const cutoffAt = cutoff.rows[0]?.now ?? new Date();
          const total = await customerConversations(trx, tenantId, cutoffAt)
            .select(sql<number>`count(*)::int`.as('n'))
            .executeTakeFirstOrThrow();
          const row = (await trx
            .insertInto('coverage_extractions')
            .values({
              id: newId(),
              tenant_id: tenantId,
              referential_id: referentialId,
              total_conversations: Number(total.n),
              cutoff_at: cutoffAt,
            })
            .returning(EXTRACTION_COLUMNS)
            .executeTakeFirstOrThrow()) as ExtractionRow;
          await jobs.enqueue(trx, {
            kind: COVERAGE_EXTRACTION_JOB,
            tenantId,
            payload: { extraction_id: row.id, cursor: null },
            maxAttempts: 3,
          });
          return toExtraction(row);
        });
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new ConflictError('A question extraction is already queued or running in this workspace.');
        }
        throw error;
      }
    },

    /** The latest run of the workspace, with its live progress. */
    async extractionStatus(tenantId: string): Promise<ExtractionRecord> {
      const row = (await db
        .selectFrom('coverage_extractions')
        .select(EXTRACTION_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirst()) as ExtractionRow | undefined;
      return row ? toExtraction(row) : NEVER_RUN;
    },
  };
}

export type ExtractionService = ReturnType<typeof createExtractionService>;
