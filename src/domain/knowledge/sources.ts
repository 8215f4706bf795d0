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
import type { Page } from '../pagination.js';
import { createSource, deleteSource, getSource, listSources, updateSource } from './sources-crud.js';
import type { CreateSourceInput, UpdateSourceInput } from './sources-records.js';
import {
  enqueueDueAutoSyncs,
  recordSyncFailure,
  requestSync,
  runSync,
  SOURCE_SYNC_JOB,
  type SourceServiceDeps,
} from './sources-sync.js';

export {
  type CreateSourceInput,
  SOURCE_TYPES,
  SourceRecord,
  SourceType,
  SYNC_STATUSES,
  SyncAcknowledgement,
  SyncStatus,
  type UpdateSourceInput,
} from './sources-records.js';
export { SOURCE_SYNC_JOB, type SourceServiceDeps } from './sources-sync.js';

/** How often a started queue looks for auto-sync sources that are due. */
const AUTO_SYNC_CHECK_MS = 60_000;

export function createSourceService(deps: SourceServiceDeps) {
  const { db, jobs } = deps;

  jobs.register(SOURCE_SYNC_JOB, (job, ctx) => runSync(deps, job, ctx), {
    onFailed: (job) => recordSyncFailure(deps, job),
  });
  jobs.schedule('auto-sync', Math.min(AUTO_SYNC_CHECK_MS, deps.autoSyncIntervalMinutes * 60_000), async () => {
    await enqueueDueAutoSyncs(deps);
  });

  return {
    create: (tenantId: string, input: CreateSourceInput) => createSource(db, tenantId, input),
    list: (tenantId: string, page: Page) => listSources(db, tenantId, page),
    get: (tenantId: string, id: string) => getSource(db, tenantId, id),
    update: (tenantId: string, id: string, input: UpdateSourceInput) => updateSource(db, tenantId, id, input),
    delete: (tenantId: string, id: string) => deleteSource(db, tenantId, id),
    requestSync: (tenantId: string, id: string) => requestSync(deps, tenantId, id),
    enqueueDueAutoSyncs: () => enqueueDueAutoSyncs(deps),
  };
}

export type SourceService = ReturnType<typeof createSourceService>;
