// Knowledge sources and their sync (spec: Update Source, Sync Source; DESIGN.md §5, §7).
// A sync runs on the durable job queue. `sync_status`:
//   never_synced → pending (a sync is queued) → syncing (a worker runs it) → synced | failed
// with `sync_error` saying why a sync failed, and `last_synced_at` set when one succeeds. One sync
// per source at a time: the job's dedupe key makes a second request join the queued or running one.
// Connectors: `website` crawls `domain` (src/domain/knowledge/website-connector.ts); `manual` holds the
// documents created through the API, and its sync re-indexes them.
// A sync records its result only if the source still names the domain it crawled: a domain
// changed during the crawl (Update Source) is crawled in turn by the same job, run once more (a
// follow-up, queued behind the jobs already due), so a sync requested after the change, which
// joined it, ends with the new site's pages. A request that comes when the
// running job has already written its result (it is only finishing) asks the queue for one
// follow-up run of that job instead, since joining it would sync nothing.
import { sql } from 'kysely';
import type { Db } from '../../db/client.js';
import { isForeignKeyViolation } from '../../db/errors.js';
import type { Job, JobContext, JobQueue } from '../../jobs/queue.js';
import { newId } from '../../lib/ids.js';
import { OutboundRequestError } from '../../lib/ssrf.js';
import { iso } from '../../lib/time.js';
import { MissingParameterError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { DocumentService } from './documents.js';
import { CrawlError, type CrawlOptions, crawlWebsite, startUrl } from './website-connector.js';

export const SOURCE_TYPES = ['website', 'manual'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const SYNC_STATUSES = ['never_synced', 'pending', 'syncing', 'synced', 'failed'] as const;
export type SyncStatus = (typeof SYNC_STATUSES)[number];

export const SOURCE_SYNC_JOB = 'source.sync';
/** How often a started queue looks for auto-sync sources that are due. */
const AUTO_SYNC_CHECK_MS = 60_000;
const AUTO_SYNC_BATCH = 500;

export interface SourceRecord {
  id: string;
  object: 'source';
  name: string;
  source_type: SourceType;
  /** Your own identifier for the source (spec field `source_id`); `id` is ours. */
  source_id: string | null;
  domain: string | null;
  additional_info: Record<string, unknown>;
  sync_status: SyncStatus;
  sync_error: string | null;
  auto_sync_enabled: boolean;
  last_synced_at: string | null;
  document_count: number;
  created_at: string;
  updated_at: string;
}

export interface SyncAcknowledgement {
  object: 'sync';
  status: SyncStatus;
  source_id: string;
}

export interface CreateSourceInput {
  name: string;
  source_type: SourceType;
  domain?: string | undefined;
  source_id?: string | undefined;
  additional_info?: Record<string, unknown> | undefined;
  auto_sync_enabled?: boolean | undefined;
}

export type UpdateSourceInput = Partial<Omit<CreateSourceInput, 'source_type'>>;

type SourceRow = {
  id: string;
  name: string;
  source_type: SourceType;
  external_id: string | null;
  domain: string | null;
  additional_info: Record<string, unknown>;
  sync_status: string;
  sync_error: string | null;
  auto_sync_enabled: boolean;
  last_synced_at: Date | null;
  created_at: Date;
  updated_at: Date;
  document_count: number;
};

const COLUMNS = [
  'id',
  'name',
  'source_type',
  'external_id',
  'domain',
  'additional_info',
  'sync_status',
  'sync_error',
  'auto_sync_enabled',
  'last_synced_at',
  'created_at',
  'updated_at',
] as const;

const toRecord = (row: SourceRow): SourceRecord => ({
  id: row.id,
  object: 'source',
  name: row.name,
  source_type: row.source_type,
  source_id: row.external_id,
  domain: row.domain,
  additional_info: row.additional_info ?? {},
  sync_status: row.sync_status as SyncStatus,
  sync_error: row.sync_error,
  auto_sync_enabled: row.auto_sync_enabled,
  last_synced_at: iso(row.last_synced_at),
  document_count: Number(row.document_count ?? 0),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/** A website's domain must name an http(s) site: `example.com` or `https://example.com/help`. */
function checkDomain(domain: string): string {
  const trimmed = domain.trim();
  try {
    startUrl(trimmed);
  } catch (error) {
    throw new ValidationError('domain', (error as Error).message);
  }
  return trimmed;
}

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

export function createSourceService(deps: SourceServiceDeps) {
  const { db, jobs, documents } = deps;

  function selectSources(tenantId: string) {
    return db
      .selectFrom('sources')
      .select(COLUMNS)
      .select((eb) =>
        eb
          .selectFrom('documents')
          .select(sql<number>`count(*)::int`.as('n'))
          .whereRef('documents.source_id', '=', 'sources.id')
          .where('documents.tenant_id', '=', tenantId)
          .as('document_count'),
      )
      .where('tenant_id', '=', tenantId);
  }

  async function get(tenantId: string, id: string): Promise<SourceRecord> {
    const row = (await selectSources(tenantId).where('id', '=', id).executeTakeFirst()) as SourceRow | undefined;
    if (!row) throw new NotFoundError('source', id);
    return toRecord(row);
  }

  /**
   * Writes the sync status; with `crawled`, only while the source still names that domain. False
   * when nothing was written (the source is gone, or its domain changed).
   */
  async function setStatus(
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
  async function stillNames(tenantId: string, id: string, domain: string): Promise<boolean> {
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
  async function requestSync(tenantId: string, id: string): Promise<SyncAcknowledgement> {
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
  async function runSync(job: Job, ctx: JobContext): Promise<void> {
    if (await syncOnce(job, ctx)) return;
    // Only while this run still holds the job: a worker that took the job over reads the source
    // afresh, and marking its run would crawl once more for nothing (and show it `pending`).
    await ctx.heartbeat();
    if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('the job lease passed to another worker');
    const sourceId = String(job.payload.source_id ?? '');
    // The source's row first, then the job's, as a sync request takes them.
    await db.transaction().execute(async (trx) => {
      await trx
        .updateTable('sources')
        .set({ sync_status: 'pending', updated_at: sql`now()` })
        .where('tenant_id', '=', job.tenantId)
        .where('id', '=', sourceId)
        .execute();
      await jobs.enqueue(trx, {
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
  async function syncOnce(job: Job, ctx: JobContext): Promise<boolean> {
    const sourceId = String(job.payload.source_id ?? '');
    const tenantId = job.tenantId;
    const source = await db
      .selectFrom('sources')
      .select(['id', 'source_type', 'domain'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', sourceId)
      .executeTakeFirst();
    if (!source) return true; // deleted since: nothing to do
    await setStatus(tenantId, sourceId, 'syncing');
    // What the crawl read: its result is written only while the source still names it.
    const crawled = source.source_type === 'website' && source.domain ? { crawled: source.domain } : {};
    try {
      if (source.source_type === 'website') {
        if (!source.domain) throw new CrawlError('The source has no domain to crawl.');
        const crawl = await crawlWebsite(source.domain, {
          ...deps.crawl,
          allowPrivate: deps.allowPrivateTargets,
          signal: ctx.signal,
        });
        await ctx.heartbeat();
        if (!(await stillNames(tenantId, sourceId, source.domain))) return false;
        const unreadable = new Set(crawl.unreadable);
        const visited = new Set(crawl.visited);
        // A page the crawl could not read stays, and so does one a crawl stopped by the page cap
        // never reached: only a page it read as gone is removed.
        const keep = (pageId: string) => unreadable.has(pageId) || (crawl.truncated && !visited.has(pageId));
        await documents.replaceSourcePages(tenantId, sourceId, crawl.pages, keep);
      } else {
        await documents.reindexSource(tenantId, sourceId);
      }
      // The domain changed (or the source went) since the check above: the pages just written are
      // the old site's, and the next pass replaces them.
      if (!(await setStatus(tenantId, sourceId, 'synced', { sync_error: null, synced: true, ...crawled }))) {
        return false;
      }
      await deps.emitEvent?.(db, tenantId, 'source.sync.completed', { source: await get(tenantId, sourceId) });
      return true;
    } catch (error) {
      // Stopped (the server is stopping, or the lease passed to another worker): not the site's
      // failure, and the source's status is not ours to write now. The queue runs it again.
      if (ctx.signal.aborted) throw ctx.signal.reason ?? error;
      if (error instanceof CrawlError || error instanceof OutboundRequestError) {
        // The site's answer, not ours: report it and wait for the next request or schedule. The
        // old domain's failure is not the new one's: a changed domain is crawled instead.
        if (!(await setStatus(tenantId, sourceId, 'failed', { sync_error: error.message, ...crawled }))) {
          return false;
        }
        await deps.emitEvent?.(db, tenantId, 'source.sync.failed', { source: await get(tenantId, sourceId) });
        return true;
      }
      if (isForeignKeyViolation(error)) return true; // the source was deleted during the crawl
      // Retried by the queue; after the last attempt, `onFailed` records the failure.
      if (job.attempts < job.maxAttempts) {
        await setStatus(tenantId, sourceId, 'pending', {
          sync_error: `Attempt ${job.attempts} failed because of an internal error; it will be retried.`,
        });
      }
      throw error;
    }
  }

  jobs.register(SOURCE_SYNC_JOB, runSync, {
    // The last attempt failed, or every worker running it died: say so on the source.
    onFailed: async (job) => {
      if (typeof job.payload.source_id !== 'string') return;
      await setStatus(job.tenantId, job.payload.source_id, 'failed', {
        sync_error: 'The sync failed because of an internal error or was interrupted; request another sync.',
      });
      const source = await get(job.tenantId, job.payload.source_id).catch(() => undefined);
      if (source) await deps.emitEvent?.(db, job.tenantId, 'source.sync.failed', { source });
    },
  });

  /**
   * Queues a sync of every auto-sync source not synced within the interval (a failed one is tried
   * again an interval after its failure). Runs for all tenants; each source's job is its tenant's.
   */
  async function enqueueDueAutoSyncs(): Promise<number> {
    const interval = `${deps.autoSyncIntervalMinutes} minutes`;
    const due = await db
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
        await requestSync(source.tenant_id, source.id);
        queued++;
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error;
      }
    }
    return queued;
  }

  jobs.schedule('auto-sync', Math.min(AUTO_SYNC_CHECK_MS, deps.autoSyncIntervalMinutes * 60_000), async () => {
    await enqueueDueAutoSyncs();
  });

  return {
    async create(tenantId: string, input: CreateSourceInput): Promise<SourceRecord> {
      let domain: string | null = null;
      if (input.domain !== undefined) domain = checkDomain(input.domain);
      else if (input.source_type === 'website') {
        throw new MissingParameterError('domain', 'A website source needs the domain to crawl.');
      }
      const row = await db
        .insertInto('sources')
        .values({
          id: newId(),
          tenant_id: tenantId,
          name: input.name,
          source_type: input.source_type,
          external_id: input.source_id ?? null,
          domain,
          additional_info: JSON.stringify(input.additional_info ?? {}),
          auto_sync_enabled: input.auto_sync_enabled ?? false,
        })
        .returning(COLUMNS)
        .executeTakeFirstOrThrow();
      return toRecord({ ...row, document_count: 0 });
    },

    async list(tenantId: string, page: Page) {
      let query = selectSources(tenantId);
      query = newestFirst(query, page);
      const rows = (await query.execute()) as SourceRow[];
      return toList(rows, page, toRecord, (row) => row.id);
    },

    get,

    /** Spec: Update Source — changes the fields sent and returns the source record. */
    async update(tenantId: string, id: string, input: UpdateSourceInput): Promise<SourceRecord> {
      const set: Record<string, unknown> = {};
      if (input.name !== undefined) set.name = input.name;
      if (input.source_id !== undefined) set.external_id = input.source_id;
      if (input.domain !== undefined) set.domain = checkDomain(input.domain);
      if (input.additional_info !== undefined) set.additional_info = JSON.stringify(input.additional_info);
      if (input.auto_sync_enabled !== undefined) set.auto_sync_enabled = input.auto_sync_enabled;
      if (Object.keys(set).length > 0) {
        const result = await db
          .updateTable('sources')
          .set({ ...set, updated_at: sql`now()` })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) === 0) throw new NotFoundError('source', id);
      }
      return get(tenantId, id);
    },

    /** Deletes the source with its documents (and their translations). */
    async delete(tenantId: string, id: string) {
      const row = await db
        .deleteFrom('sources')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('source', id);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },

    requestSync,
    enqueueDueAutoSyncs,
  };
}

export type SourceService = ReturnType<typeof createSourceService>;
