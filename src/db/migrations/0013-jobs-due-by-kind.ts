// Each lane of the job queue claims only its own kinds, oldest due first, and skips the tenants
// at their lane's cap (src/jobs/queue.ts). Due jobs were indexed by `run_at` alone, so every claim
// read every due job of every kind: a backlog of webhook deliveries (one tenant's, say, held back
// by its cap) made each poll of the default lane read it all to find a sync. Indexed by kind
// first, a lane reads only its own due jobs; this index serves every claim the old one did.
import type { Migration } from '../migrate.js';

export const jobsDueByKind: Migration = {
  name: '0013-jobs-due-by-kind',
  statements: [`create index jobs_due_by_kind on jobs (kind, run_at) where status = 'queued'`, 'drop index jobs_due'],
};
