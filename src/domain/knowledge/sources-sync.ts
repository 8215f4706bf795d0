// A source's sync on the durable job queue: requested (joining one queued or running), run
// (the connector, then its result written while the source still names what it read), recorded
// as failed, and queued on schedule for auto-sync sources.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isForeignKeyViolation } from '../../db/index.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import { OutboundRequestError } from '../../lib/ssrf.js';
import { NotFoundError } from '../errors.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { DocumentService } from './documents.js';
import { getSource } from './sources-crud.js';
import type { SourceType, SyncAcknowledgement, SyncStatus } from './sources-records.js';
import { CrawlError, type CrawlOptions, crawlWebsite } from './website-connector.js';

export const SOURCE_SYNC_JOB = 'source.sync';
const AUTO_SYNC_BATCH = 500;

export interface SourceServiceDeps {
  db: Db;
  jobs: JobQueue;
  documents: DocumentService;
  allowPrivateTargets: boolean;
  autoSyncIntervalMinutes: number;
  /** Crawl caps and timeouts (defaults in connectors/website.ts). */
  crawl?: Omit<CrawlOptions, 'allowPrivate' | 'signal'>;
  log?: { warn(obj: object, msg: string): void };
  /** Webhook events `source.sync.completed` / `source.sync.failed`. */
  emitEvent?: EmitEvent;
}

/**
 * Writes the sync status; with `crawled`, only while the source still names that domain. False
 * when nothing was written (the source is gone, or its domain changed).
 */
async function setStatus(
  db: Db,
  tenantId: string,
  id: string,
  status: SyncStatus,
  fields: { sync_error?: string | null; synced?: boolean; crawled?: string } = {},
): Promise<boolean> {
  let update = db
    .updateTable('sources')
    .set({
      sync_status: status,
      ...(fields.sync_error !== undefined ? { sync_error: fields.sync_error } : {}),
      ...(fields.synced ? { last_synced_at: sql`now()` } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id);
  if (fields.crawled !== undefined) update = update.where('domain', '=', fields.crawled);
  const result = await update.executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The source still names the domain a crawl read (false too when it was deleted). */
async function stillNames(db: Db, tenantId: string, id: string, domain: string): Promise<boolean> {
  const row = await db
    .selectFrom('sources')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('domain', '=', domain)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Queues a sync unless one is queued or running; answers the source's sync status. A running
 * one is joined while it has not yet written its result (it checks the domain before it does);
 * once it has, it is only finishing, and it runs once more after it ends.
 */
export async function requestSync(
  { db, jobs }: SourceServiceDeps,
  tenantId: string,
  id: string,
): Promise<SyncAcknowledgement> {
  return db.transaction().execute(async (trx) => {
    const source = await trx
      .selectFrom('sources')
      .select(['id', 'sync_status'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!source) throw new NotFoundError('source', id);
    // The row lock orders this against the job's writes of the source: read here, `pending` or
    // `syncing` means a running job has not written its result yet.
    const written = source.sync_status !== 'pending' && source.sync_status !== 'syncing';
    const queued = await jobs.enqueue(trx, {
      kind: SOURCE_SYNC_JOB,
      tenantId,
      payload: { source_id: source.id },
      dedupeKey: `source-sync:${source.id}`,
      followUp: written,
      maxAttempts: 3,
    });
    if (queued.deduplicated && !queued.followUp) {
      const status = source.sync_status === 'syncing' ? 'syncing' : 'pending';
      return { object: 'sync' as const, status, source_id: source.id };
    }
    await trx
      .updateTable('sources')
      .set({ sync_status: 'pending', sync_error: null, updated_at: sql`now()` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', source.id)
      .execute();
    return { object: 'sync' as const, status: 'pending' as const, source_id: source.id };
  });
}

/**
 * The sync job: read the source, run its connector (no transaction open), write the result.
 * When the source's domain changed during a crawl, the result is the old site's: it is not
 * written, and the job runs once more (a follow-up) to crawl the new one. It goes back to the
 * queue for that, behind the jobs already due, so a tenant that keeps changing a domain does not
 * keep a worker.
 */
export async function runSync(deps: SourceServiceDeps, job: Job, ctx: JobContext): Promise<void> {
  if (await syncOnce(deps, job, ctx)) return;
  // Only while this run still holds the job: a worker that took the job over reads the source
  // afresh, and marking its run would crawl once more for nothing (and show it `pending`).
  await ctx.heartbeat();
  if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('the job lease passed to another worker');
  const sourceId = String(job.payload.source_id ?? '');
  // The source's row first, then the job's, as a sync request takes them.
  await deps.db.transaction().execute(async (trx) => {
    await trx
      .updateTable('sources')
      .set({ sync_status: 'pending', updated_at: sql`now()` })
      .where('tenant_id', '=', job.tenantId)
      .where('id', '=', sourceId)
      .execute();
    await deps.jobs.enqueue(trx, {
      kind: SOURCE_SYNC_JOB,
      tenantId: job.tenantId,
      payload: { source_id: sourceId },
      dedupeKey: `source-sync:${sourceId}`,
      followUp: true,
      maxAttempts: 3,
    });
  });
}

/** One pass of the sync job; false when the domain changed during its crawl. */
async function syncOnce(deps: SourceServiceDeps, job: Job, ctx: JobContext): Promise<boolean> {
  const { db } = deps;
  const sourceId = String(job.payload.source_id ?? '');
  const tenantId = job.tenantId;
  const source = await db
    .selectFrom('sources')
    .select(['id', 'source_type', 'domain'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', sourceId)
    .executeTakeFirst();
  if (!source) return true; // deleted since: nothing to do
  await setStatus(db, tenantId, sourceId, 'syncing');
  // What the crawl read: its result is written only while the source still names it.
  const crawled = source.source_type === 'website' && source.domain ? { crawled: source.domain } : {};
  try {
    if (!(await runConnector(deps, tenantId, source, ctx))) return false;
    // The domain changed (or the source went) since the connector's check: the pages just written
    // are the old site's, and the next pass replaces them.
    if (!(await setStatus(db, tenantId, sourceId, 'synced', { sync_error: null, synced: true, ...crawled }))) {
      return false;
    }
    await deps.emitEvent?.(db, tenantId, 'source.sync.completed', { source: await getSource(db, tenantId, sourceId) });
    return true;
  } catch (error) {
    return await syncFailed(deps, job, ctx, error, crawled);
  }
}

/**
 * The source's connector: a website is crawled and its pages written, unless the source no longer
 * names the domain crawled (false); a manual source's documents are re-indexed.
 */
async function runConnector(
  deps: SourceServiceDeps,
  tenantId: string,
  source: { id: string; source_type: SourceType; domain: string | null },
  ctx: JobContext,
): Promise<boolean> {
  const { documents } = deps;
  if (source.source_type !== 'website') {
    await documents.reindexSource(tenantId, source.id);
    return true;
  }
  if (!source.domain) throw new CrawlError('The source has no domain to crawl.');
  const crawl = await crawlWebsite(source.domain, {
    ...deps.crawl,
    allowPrivate: deps.allowPrivateTargets,
    signal: ctx.signal,
  });
  await ctx.heartbeat();
  if (!(await stillNames(deps.db, tenantId, source.id, source.domain))) return false;
  const unreadable = new Set(crawl.unreadable);
  const visited = new Set(crawl.visited);
  // A page the crawl could not read stays, and so does one a crawl stopped by the page cap
  // never reached: only a page it read as gone is removed.
  const keep = (pageId: string) => unreadable.has(pageId) || (crawl.truncated && !visited.has(pageId));
  await documents.replaceSourcePages(tenantId, source.id, crawl.pages, keep);
  return true;
}

/** A pass that threw: the site's failure is recorded; anything else goes back to the queue. */
async function syncFailed(
  deps: SourceServiceDeps,
  job: Job,
  ctx: JobContext,
  error: unknown,
  crawled: { crawled?: string },
): Promise<boolean> {
  const { db } = deps;
  const sourceId = String(job.payload.source_id ?? '');
  const tenantId = job.tenantId;
  // Stopped (the server is stopping, or the lease passed to another worker): not the site's
  // failure, and the source's status is not ours to write now. The queue runs it again.
  if (ctx.signal.aborted) throw ctx.signal.reason ?? error;
  if (error instanceof CrawlError || error instanceof OutboundRequestError) {
    // The site's answer, not ours: report it and wait for the next request or schedule. The
    // old domain's failure is not the new one's: a changed domain is crawled instead.
    if (!(await setStatus(db, tenantId, sourceId, 'failed', { sync_error: error.message, ...crawled }))) {
      return false;
    }
    await deps.emitEvent?.(db, tenantId, 'source.sync.failed', { source: await getSource(db, tenantId, sourceId) });
    return true;
  }
  if (isForeignKeyViolation(error)) return true; // the source was deleted during the crawl
  // Retried by the queue; after the last attempt, `onFailed` records the failure.
  if (job.attempts < job.maxAttempts) {
    await setStatus(db, tenantId, sourceId, 'pending', {
      sync_error: `Attempt ${job.attempts} failed because of an internal error; it will be retried.`,
    });
  }
  throw error;
}

/** The last attempt failed, or every worker running it died: say so on the source. */
export async function recordSyncFailure({ db, emitEvent }: SourceServiceDeps, job: Job): Promise<void> {
  if (typeof job.payload.source_id !== 'string') return;
  await setStatus(db, job.tenantId, job.payload.source_id, 'failed', {
    sync_error: 'The sync failed because of an internal error or was interrupted; request another sync.',
  });
  const source = await getSource(db, job.tenantId, job.payload.source_id).catch(() => undefined);
  if (source) await emitEvent?.(db, job.tenantId, 'source.sync.failed', { source });
}

/**
 * Queues a sync of every auto-sync source not synced within the interval (a failed one is tried
 * again an interval after its failure). Runs for all tenants; each source's job is its tenant's.
 */
export async function enqueueDueAutoSyncs(deps: SourceServiceDeps): Promise<number> {
  const interval = `${deps.autoSyncIntervalMinutes} minutes`;
  const due = await deps.db
    .selectFrom('sources')
    .select(['id', 'tenant_id'])
    .where('auto_sync_enabled', '=', true)
    .where((eb) =>
      eb.or([
        eb.and([
          eb('sync_status', 'in', ['never_synced', 'synced']),
          eb.or([
            eb('last_synced_at', 'is', null),
            eb('last_synced_at', '<', sql<Date>`now() - ${interval}::interval`),
          ]),
        ]),
        eb.and([eb('sync_status', '=', 'failed'), eb('updated_at', '<', sql<Date>`now() - ${interval}::interval`)]),
      ]),
    )
    .orderBy('last_synced_at', (ob) => ob.asc().nullsFirst())
    .limit(AUTO_SYNC_BATCH)
    .execute();
  let queued = 0;
  for (const source of due) {
    try {
      await requestSync(deps, source.tenant_id, source.id);
      queued++;
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
  }
  return queued;
}
