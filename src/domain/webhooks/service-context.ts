import type { Db } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import type { SecretBox } from '../../lib/secret-box.js';

/** What the webhook service's operations share: the database, the queue, the secrets and the clock. */
export interface WebhookContext {
  db: Db;
  jobs: Pick<JobQueue, 'enqueue'>;
  allowPrivateTargets: boolean;
  /** Seals signing secrets at rest (SECRETS_KEY); without a key it stores them as they are. */
  secrets: SecretBox;
  /** How long after a replay a failed delivery is still retried. */
  retryWindowMs: number;
  now: () => Date;
}
