// Queries whose cost the caller's input decides: full-text searches over a tenant's documents and
// rows, and dashboard reports. Unbounded, ten such searches at once over one tenant's large
// documents held the whole pool, and other tenants' simple reads waited tens of seconds. So each
// runs:
// - in a slot: at most `maxConcurrent` at once in this process (the rest of the pool stays free for
//   everything else), a tenant at most `perTenant` of them (one tenant cannot take every slot); a
//   query that finds no slot free waits for one, in turn, up to its time limit;
// - under a time limit: `statement_timeout` set inside its transaction, so PostgreSQL cancels it,
//   and a deadline outside. PGlite ignores the statement timeout: there the deadline answers, and
//   the slot stays taken until the statement has ended in the database's thread, so the slots
//   still bound what waits there.
import { sql } from 'kysely';
import type { Db } from './client.js';
import { isQueryCanceled } from './errors.js';

export interface HeavyQueryLimits {
  /** Heavy queries running at once in this process. */
  maxConcurrent: number;
  /** Of those, one tenant's. */
  perTenant: number;
}

export interface TimeLimit {
  /** How long the query may wait for a slot, and then how long it may run. */
  timeoutMs: number;
  /** The error when the query outruns its time. */
  tooLong: () => Error;
  /** The error when no slot frees in time. */
  busy: () => Error;
}

export type HeavyQueries = ReturnType<typeof createHeavyQueries>;

export function createHeavyQueries(db: Db, limits: HeavyQueryLimits) {
  const slots = createFairSlots(limits.maxConcurrent, limits.perTenant);
  return {
    /** Runs `work` in a transaction of its own, in one of the tenant's slots, within `limit`. */
    async run<T>(tenantId: string, limit: TimeLimit, work: (trx: Db) => Promise<T>): Promise<T> {
      const release = await slots.acquire(tenantId, limit.timeoutMs);
      if (!release) throw limit.busy();
      const started = performance.now();
      const running = db.transaction().execute(async (trx) => {
        await sql`select set_config('statement_timeout', ${String(limit.timeoutMs)}, true)`.execute(trx);
        return work(trx);
      });
      // The slot is the database's until the statement has ended, whoever answers first; the
      // abandoned work must not become an unhandled rejection.
      running.then(release, release);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(limit.tooLong()), limit.timeoutMs);
      });
      try {
        const result = await Promise.race([running, deadline]);
        if (performance.now() - started > limit.timeoutMs) throw limit.tooLong();
        return result;
      } catch (error) {
        if (isQueryCanceled(error)) throw limit.tooLong();
        throw error;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/**
 * Counting slots with a share per key: at most `total` held at once, at most `perKey` by one key.
 * Waiters are served in arrival order, except that one held back by its key's share does not hold
 * back another key's. `acquire` gives a release function, or undefined after `waitMs` without one.
 */
export function createFairSlots(total: number, perKey: number) {
  let held = 0;
  const byKey = new Map<string, number>();
  const waiters: { key: string; grant: (release: () => void) => void }[] = [];

  const grantable = (key: string) => held < total && (byKey.get(key) ?? 0) < perKey;

  function take(key: string): () => void {
    held++;
    byKey.set(key, (byKey.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held--;
      const left = (byKey.get(key) ?? 1) - 1;
      if (left === 0) byKey.delete(key);
      else byKey.set(key, left);
      for (let i = 0; i < waiters.length && held < total; ) {
        const waiter = waiters[i] as (typeof waiters)[number];
        if (!grantable(waiter.key)) {
          i++;
          continue;
        }
        waiters.splice(i, 1);
        waiter.grant(take(waiter.key));
      }
    };
  }

  return {
    acquire(key: string, waitMs: number): Promise<(() => void) | undefined> {
      // Whenever nothing is being released, no waiter is grantable: a free slot is this one's.
      if (grantable(key)) return Promise.resolve(take(key));
      return new Promise((resolve) => {
        const waiter = {
          key,
          grant: (release: () => void) => {
            clearTimeout(timer);
            resolve(release);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          resolve(undefined);
        }, waitMs);
        waiters.push(waiter);
      });
    },
    /** Slots held now, in all and by `key` (for tests and metrics). */
    held: (key?: string) => (key === undefined ? held : (byKey.get(key) ?? 0)),
    waiting: () => waiters.length,
  };
}
