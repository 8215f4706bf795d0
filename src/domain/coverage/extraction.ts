// Question extraction (DESIGN.md §7): reads the tenant's conversations, takes the questions
// customers asked (their own messages, question-like sentences), drops near-duplicates (of each
// other and of the referential's questions), files each under the closest existing domain or
// `uncategorized`, and adds them to the referential. The text rules are in text.ts.
//
// A run covers the conversations started up to its creation (`cutoff_at`), in id order, one
// batch per job (extraction-batch.ts): each job processes a batch in one transaction (questions
// added and progress advanced together) and enqueues the job of the next batch. So progress is
// live and durable, and a run survives restarts. A job carries the cursor it expects; one that
// finds the run moved past it (a retry of a batch that did commit) does nothing, so no batch is
// done twice.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { ConflictError } from '../errors.js';
import { COVERAGE_EXTRACTION_JOB, customerConversations, registerExtractionJob } from './extraction-batch.js';
import {
  EXTRACTION_COLUMNS,
  type ExtractionRecord,
  type ExtractionRow,
  NEVER_RUN,
  toExtraction,
} from './extraction-records.js';
import { requireReferential } from './referential-checks.js';

export { COVERAGE_EXTRACTION_JOB } from './extraction-batch.js';

export const DEFAULT_EXTRACTION_BATCH = 50;

export interface ExtractionServiceDeps {
  db: Db;
  jobs: JobQueue;
  /** Conversations read per job (one progress step). */
  batchSize?: number;
}

export function createExtractionService(deps: ExtractionServiceDeps) {
  const { db, jobs } = deps;
  registerExtractionJob({ db, jobs, batchSize: deps.batchSize ?? DEFAULT_EXTRACTION_BATCH });
  return {
    startExtraction: (tenantId: string, input: { referential_id: string }) =>
      startExtraction(db, jobs, tenantId, input),
    extractionStatus: (tenantId: string) => extractionStatus(db, tenantId),
  };
}

export type ExtractionService = ReturnType<typeof createExtractionService>;

/** Queues a run over the conversations started so far; one run at a time per workspace. */
async function startExtraction(
  db: Db,
  jobs: JobQueue,
  tenantId: string,
  input: { referential_id: string },
): Promise<ExtractionRecord> {
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
}

/** The latest run of the workspace, with its live progress. */
async function extractionStatus(db: Db, tenantId: string): Promise<ExtractionRecord> {
  const row = (await db
    .selectFrom('coverage_extractions')
    .select(EXTRACTION_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst()) as ExtractionRow | undefined;
  return row ? toExtraction(row) : NEVER_RUN;
}
