// The job of a question-extraction run: one batch of conversations per job, in one transaction:
// the referential and the run are locked, the batch's customer messages read, their new questions
// filed by domain and added, the run advanced, and the job of the next batch enqueued. The text
// rules are in text.ts.
import { sql } from 'kysely';
import type { CoverageRunStatus, Db } from '../../db/index.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { touchReferential } from './questions.js';
import { closestDomain, contentWords, extractQuestions, isNearDuplicate } from './text.js';

export const COVERAGE_EXTRACTION_JOB = 'coverage.extract';

export interface ExtractionBatchDeps {
  db: Db;
  jobs: JobQueue;
  /** Conversations read per job (one progress step). */
  batchSize: number;
}

type Run = {
  id: string;
  referential_id: string;
  status: CoverageRunStatus;
  last_conversation_id: string | null;
  cutoff_at: Date;
};
type CustomerMessage = { id: string; conversation_id: string; content: string };
type DomainVocabulary = { domain: string; vocabulary: Set<string>; questionCount: number };
/** The referential as it stands: its questions' words, and each domain's vocabulary. */
type Referential = { known: Set<string>[]; domains: DomainVocabulary[] };
type ExtractedQuestion = {
  id: string;
  tenant_id: string;
  referential_id: string;
  question: string;
  domain: string;
  origin: 'extracted';
  conversation_id: string;
  message_id: string;
};

/**
 * The conversations a run reads: the workspace's, started by the cutoff, and a customer's: those a
 * simulation run holds with the agent are kept out of what describes customers (docs/simulations.md).
 */
export function customerConversations(db: Db, tenantId: string, cutoff: Date) {
  return db
    .selectFrom('conversations')
    .where('tenant_id', '=', tenantId)
    .where('created_at', '<=', cutoff)
    .where(isCustomerConversation(tenantId, 'id'));
}

export function registerExtractionJob(deps: ExtractionBatchDeps): void {
  deps.jobs.register(COVERAGE_EXTRACTION_JOB, (job, ctx) => runBatch(deps, job, ctx), {
    // Every worker running a batch died (no catch in the batch ran): the run is failed, so it
    // neither reads as running for ever nor blocks the next run (one active run per workspace).
    onFailed: async (job) => {
      await deps.db
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
}

/** One batch: read conversations after the cursor, add their new questions, advance, chain. */
async function runBatch(deps: ExtractionBatchDeps, job: Job, _ctx: JobContext): Promise<void> {
  const tenantId = job.tenantId;
  const extractionId = String(job.payload.extraction_id ?? '');
  const expectedCursor = (job.payload.cursor as string | null | undefined) ?? null;
  try {
    await deps.db.transaction().execute(async (trx) => {
      const run = await lockRun(trx, tenantId, extractionId);
      // Gone with its referential, finished, or already past this job's batch.
      if (!run || (run.status !== 'queued' && run.status !== 'running')) return;
      if (run.last_conversation_id !== expectedCursor) return;

      const conversationIds = await nextConversations(trx, tenantId, run, deps.batchSize);
      const messages = await customerMessages(trx, tenantId, conversationIds);
      const referential = await referentialVocabulary(trx, tenantId, run.referential_id);
      const { found, added } = newQuestions(tenantId, run.referential_id, messages, referential);
      await addQuestions(trx, tenantId, run.referential_id, added);
      await advance(trx, deps, tenantId, extractionId, conversationIds, { found, added: added.length });
    });
  } catch (error) {
    await recordFailedBatch(deps.db, job, extractionId, error);
    throw error;
  }
}

/**
 * The run, locked, with the referential it adds to. The referential is locked first, so a
 * concurrent rename or batch add waits for this batch; then the run. The referential's delete
 * takes them in this order too (the referential, then its runs by cascade): the other order
 * deadlocked with it. Undefined when the run is gone with its referential.
 */
async function lockRun(trx: Db, tenantId: string, extractionId: string): Promise<Run | undefined> {
  const owner = await trx
    .selectFrom('coverage_extractions')
    .select('referential_id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', extractionId)
    .executeTakeFirst();
  if (!owner) return undefined;
  await trx
    .selectFrom('coverage_referentials')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', owner.referential_id)
    .forUpdate()
    .executeTakeFirst();
  return trx
    .selectFrom('coverage_extractions')
    .select(['id', 'referential_id', 'status', 'last_conversation_id', 'cutoff_at'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', extractionId)
    .forUpdate()
    .executeTakeFirst();
}

/** The ids of the batch: the run's conversations after its cursor, in id order. */
async function nextConversations(trx: Db, tenantId: string, run: Run, batchSize: number): Promise<string[]> {
  let query = customerConversations(trx, tenantId, run.cutoff_at).select('id').orderBy('id').limit(batchSize);
  if (run.last_conversation_id) query = query.where('id', '>', run.last_conversation_id);
  return (await query.execute()).map((c) => c.id);
}

/** What customers wrote in the batch's conversations (not hidden), in conversation order. */
async function customerMessages(trx: Db, tenantId: string, conversationIds: string[]): Promise<CustomerMessage[]> {
  if (conversationIds.length === 0) return [];
  return trx
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
}

async function referentialVocabulary(trx: Db, tenantId: string, referentialId: string): Promise<Referential> {
  const existing = await trx
    .selectFrom('coverage_questions')
    .select(['question', 'domain'])
    .where('tenant_id', '=', tenantId)
    .where('referential_id', '=', referentialId)
    .execute();
  const known = existing.map((q) => contentWords(q.question));
  const domains = new Map<string, DomainVocabulary>();
  existing.forEach((q, i) => {
    const entry = domains.get(q.domain) ?? { domain: q.domain, vocabulary: new Set(), questionCount: 0 };
    for (const word of known[i] ?? []) entry.vocabulary.add(word);
    entry.questionCount += 1;
    domains.set(q.domain, entry);
  });
  return { known, domains: [...domains.values()] };
}

/**
 * The questions of the messages, how many were found, and those to add: not near-duplicates of
 * the referential's or of one added before, each filed under its closest domain.
 */
function newQuestions(
  tenantId: string,
  referentialId: string,
  messages: CustomerMessage[],
  { known, domains }: Referential,
): { found: number; added: ExtractedQuestion[] } {
  let found = 0;
  const added: ExtractedQuestion[] = [];
  for (const message of messages) {
    for (const question of extractQuestions(message.content)) {
      found += 1;
      const words = contentWords(question);
      if (words.size === 0 || known.some((other) => isNearDuplicate(words, other))) continue;
      known.push(words);
      added.push({
        id: newId(),
        tenant_id: tenantId,
        referential_id: referentialId,
        question,
        domain: closestDomain(words, domains),
        origin: 'extracted',
        conversation_id: message.conversation_id,
        message_id: message.id,
      });
    }
  }
  return { found, added };
}

async function addQuestions(trx: Db, tenantId: string, referentialId: string, added: ExtractedQuestion[]) {
  if (added.length === 0) return;
  await trx.insertInto('coverage_questions').values(added).execute();
  await touchReferential(trx, tenantId, referentialId);
}

/**
 * Moves the run past the batch: its counts and cursor, completed when the batch was short;
 * otherwise the next batch's job is enqueued in the same transaction.
 */
async function advance(
  trx: Db,
  { jobs, batchSize }: Pick<ExtractionBatchDeps, 'jobs' | 'batchSize'>,
  tenantId: string,
  extractionId: string,
  conversationIds: string[],
  questions: { found: number; added: number },
) {
  const last = conversationIds[conversationIds.length - 1];
  const finished = conversationIds.length < batchSize;
  await trx
    .updateTable('coverage_extractions')
    .set({
      status: finished ? 'completed' : 'running',
      started_at: sql`coalesce(started_at, now())`,
      ...(finished ? { finished_at: sql`now()` } : {}),
      processed_conversations: sql`processed_conversations + ${conversationIds.length}`,
      questions_found: sql`questions_found + ${questions.found}`,
      questions_added: sql`questions_added + ${questions.added}`,
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
}

/** A failed batch: the last attempt fails the run; an earlier one notes the error and is retried. */
async function recordFailedBatch(db: Db, job: Job, extractionId: string, error: unknown) {
  const final = job.attempts >= job.maxAttempts;
  const reason = error instanceof Error ? error.message : String(error);
  await db
    .updateTable('coverage_extractions')
    .set({
      ...(final ? { status: 'failed' as const, finished_at: sql`now()` } : {}),
      error: final ? `The extraction failed: ${reason}` : `A batch failed (${reason}); retrying.`,
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', job.tenantId)
    .where('id', '=', extractionId)
    .where('status', 'in', ['queued', 'running'])
    .execute();
}
