// MCP concurrency slots (spec: Limits, "MCP concurrency: limited; brief wait for a slot, then
// 429"): at most MCP_MAX_CONCURRENT requests at once, per process, or across every instance
// through Redis when REDIS_URL is set. A request waits up to MCP_SLOT_WAIT_MS for a slot.
// While Redis does not answer, the slots of this process stand in, so MCP keeps serving.
import type { Redis } from 'ioredis';
import { newId } from '../lib/ids.js';

export interface SlotPool {
  /** Resolves to a release function, or to null when no slot freed up in time. */
  acquire(waitMs: number): Promise<(() => Promise<void>) | null>;
}

export function createLocalSlots(max: number): SlotPool {
  let inUse = 0;
  const waiters: (() => void)[] = [];
  const release = async () => {
    const next = waiters.shift();
    if (next) next();
    else inUse--;
  };
  return {
    acquire(waitMs) {
      if (inUse < max) {
        inUse++;
        return Promise.resolve(release);
      }
      return new Promise((resolve) => {
        const grant = () => {
          clearTimeout(timer);
          resolve(release);
        };
        const timer = setTimeout(() => {
          const i = waiters.indexOf(grant);
          if (i >= 0) waiters.splice(i, 1);
          resolve(null);
        }, waitMs);
        waiters.push(grant);
      });
    },
  };
}

// Slots are members of a sorted set scored by their lease expiry, so a slot held by a process
// that died frees itself when its lease runs out.
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0`;

const LEASE_MS = 120_000;
const POLL_MS = 25;

/**
 * Slots shared through Redis, or this process's own (up to `max` too) when Redis does not answer.
 * A slot is released where it was taken: a slot taken in Redis to Redis, a local one locally.
 */
export function createRedisSlots(redis: Redis, max: number, key: string): SlotPool {
  const local = createLocalSlots(max);
  return {
    async acquire(waitMs) {
      const id = newId();
      const deadline = Date.now() + waitMs;
      for (;;) {
        const now = Date.now();
        let got: unknown;
        try {
          got = await redis.eval(ACQUIRE, 1, key, now, max, now + LEASE_MS, id, LEASE_MS);
        } catch {
          // Counted per instance rather than failed; the outage is logged by reportRedisOutages.
          return local.acquire(Math.max(0, deadline - Date.now()));
        }
        if (got === 1) {
          return async () => {
            // A slot Redis cannot take back now frees itself when its lease runs out.
            await redis.zrem(key, id).catch(() => {});
          };
        }
        if (Date.now() + POLL_MS > deadline) return null;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    },
  };
}
