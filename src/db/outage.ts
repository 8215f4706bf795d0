// Database outages, logged once each. While the database cannot be reached every request that
// needs it fails (503 service_unavailable, src/operations/errors.ts), and so does every poll of the job
// queue: one log line with a stack for each of them filled the log (33 MB in a 15 s outage) and
// buried what came before. Here the first failure is logged, as a warning without a stack, and the
// rest are counted; a probe then asks the database every PROBE_MS until it answers, and that is
// logged too, with the number of failures in between (as src/lib/redis.ts does for Redis).
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Db } from './client.js';

/** How often a database that does not answer is asked again. */
export const PROBE_MS = 1_000;

export interface DatabaseOutages {
  /** A failure `isDatabaseUnreachable` recognised: logged when it begins an outage, else counted. */
  failed(error: unknown): void;
  /** Whether an outage is going on (the database has not answered since it began). */
  readonly down: boolean;
  /** Stops probing (the app closes). */
  stop(): void;
}

/** What a log needs of a connection error: no stack, nothing of the statement. */
function brief(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const code = (error as { code?: unknown }).code;
  return { type: error.name, message: error.message, ...(code !== undefined ? { code } : {}) };
}

export function reportDatabaseOutages(db: Db, log: FastifyBaseLogger, probeMs = PROBE_MS): DatabaseOutages {
  let down = false;
  let stopped = false;
  let since = 0;
  let failures = 0;
  let probing = false;
  let timer: NodeJS.Timeout | undefined;

  const probe = async () => {
    if (probing) return; // one probe at a time: a stalled connection holds one pool client, not more
    probing = true;
    try {
      await sql`select 1`.execute(db);
      if (!down || stopped) return;
      down = false;
      clearInterval(timer);
      timer = undefined;
      log.info({ failures, outage_ms: Date.now() - since }, 'The database answers again');
    } catch {
      // Still down: counted already by whatever failed.
    } finally {
      probing = false;
    }
  };

  return {
    failed(error) {
      if (stopped) return;
      failures = down ? failures + 1 : 1;
      if (down) return;
      down = true;
      since = Date.now();
      log.warn(
        { error: brief(error) },
        'The database does not answer: requests that need it answer 503 service_unavailable until it does',
      );
      timer = setInterval(() => void probe(), probeMs);
      timer.unref();
    },
    get down() {
      return down;
    },
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
