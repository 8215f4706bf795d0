// Queries whose cost the caller's input decides: full-text searches over a tenant's documents and
// rows (`q`, and the agent's knowledge search), and dashboard reports. Unbounded, ten such searches at once over one tenant's large
// documents held the whole pool, and other tenants' simple reads waited tens of seconds. So each
// runs:
// - in a slot: at most `maxConcurrent` at once in this process (the rest of the pool stays free for
//   everything else), a tenant at most `perTenant` of them; a query that finds no slot free waits
//   for one up to its time limit, and a slot that frees goes to the waiting tenant served longest
//   ago, so tenants take turns (on PGlite, one slot, a tenant with many searches waiting does not
//   keep another's behind all of them);
// - under a time limit: `statement_timeout` set inside its transaction, so PostgreSQL cancels it,
//   and a deadline outside. PGlite ignores the statement timeout: there the deadline answers, and
//   the slot stays taken until the statement has ended in the database's thread, so the slots
//   still bound what waits there. A query that had no connection by its deadline never ran: it
//   answers as busy, and does not run when the connection comes.
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
      let begun = false;
      let expired = false;
      const running = db.transaction().execute(async (trx) => {
        // Answered already (the pool had no connection in time): give the connection straight back.
        if (expired) throw limit.busy();
        begun = true;
        const left = Math.max(1, Math.ceil(limit.timeoutMs - (performance.now() - started)));
        await sql`select set_config('statement_timeout', ${String(left)}, true)`.execute(trx);
        return work(trx);
      });
      // The slot is the database's until the statement has ended, whoever answers first; the
      // abandoned work must not become an unhandled rejection.
      running.then(release, release);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          expired = true;
          // No connection yet: the search never ran; the database (pool) was busy, not the query slow.
          reject(begun ? limit.tooLong() : limit.busy());
        }, limit.timeoutMs);
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
 * A slot that frees goes to the waiter whose key was served longest ago (then in arrival order);
 * one held back by its key's share does not hold back another key's. `acquire` gives a release
 * function, or undefined after `waitMs` without one.
 */
export function createFairSlots(total: number, perKey: number) {
  let held = 0;
  const byKey = new Map<string, number>();
  const waiters: { key: string; grant: (release: () => void) => void }[] = [];

  const grantable = (key: string) => held < total && (byKey.get(key) ?? 0) < perKey;

  let tick = 0;
  const served = new Map<string, number>(); // key → when it was last given a slot

  function take(key: string): () => void {
    served.set(key, ++tick);
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
      // Of the waiters a slot can go to, the one of the key served longest ago (then arrival order):
      // a key with many waiters does not keep the others behind all of them (total 1 on PGlite).
      while (held < total) {
        let at = -1;
        for (let i = 0; i < waiters.length; i++) {
          const key = (waiters[i] as (typeof waiters)[number]).key;
          if (!grantable(key)) continue;
          if (at < 0 || (served.get(key) ?? 0) < (served.get((waiters[at] as (typeof waiters)[number]).key) ?? 0))
            at = i;
        }
        if (at < 0) break;
        const [waiter] = waiters.splice(at, 1) as [(typeof waiters)[number]];
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
