// MCP concurrency slots (spec: Limits, "MCP concurrency: limited; brief wait for a slot, then
// 429"): at most MCP_MAX_CONCURRENT requests at once, per process, or across every instance
// through Redis when REDIS_URL is set. A request waits up to MCP_SLOT_WAIT_MS for a slot.
// One tenant may hold at most half of the slots, rounded up, as with searches and the job
// queue's `tenantShare`: a tenant at its share waits while other tenants still get slots.
// While Redis does not answer, the slots of this process stand in, so MCP keeps serving.
import type { Redis } from 'ioredis';
import { createFairSlots } from '../db/index.js';
import { newId } from '../lib/ids.js';

export interface SlotPool {
  /** Resolves to a release function, or to null when no slot of `tenantId`'s share freed up in time. */
  acquire(tenantId: string, waitMs: number): Promise<(() => Promise<void>) | null>;
}

/** The slots one tenant may hold of `max`: half, rounded up. */
export function tenantShare(max: number): number {
  return Math.ceil(max / 2);
}

/** This process's slots; a slot that frees goes to the waiting tenant served longest ago. */
export function createLocalSlots(max: number): SlotPool {
  const slots = createFairSlots(max, tenantShare(max));
  return {
    async acquire(tenantId, waitMs) {
      const release = await slots.acquire(tenantId, waitMs);
      return release ? async () => release() : null;
    },
  };
}

// Slots are members of sorted sets scored by their lease expiry, so a slot held by a process
// that died frees itself when its lease runs out: one set for all (KEYS[1]) and one per tenant
// (KEYS[2]), a slot taken and given back in both at once.
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) and redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[5])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return 1
end
return 0`;

const RELEASE = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`;

const LEASE_MS = 120_000;
const POLL_MS = 25;

/** The sorted set of `tenantId`'s slots beside the pool's set `key`. */
export function tenantSlotKey(key: string, tenantId: string): string {
  return `${key}:${tenantId}`;
}

/**
 * Slots shared through Redis, or this process's own (up to `max` too) when Redis does not answer.
 * A slot is released where it was taken: a slot taken in Redis to Redis, a local one locally.
 */
export function createRedisSlots(redis: Redis, max: number, key: string): SlotPool {
  const local = createLocalSlots(max);
  const share = tenantShare(max);
  return {
    async acquire(tenantId, waitMs) {
      const id = newId();
      const tenantKey = tenantSlotKey(key, tenantId);
      const deadline = Date.now() + waitMs;
      for (;;) {
        const now = Date.now();
        let got: unknown;
        try {
          got = await redis.eval(ACQUIRE, 2, key, tenantKey, now, max, share, now + LEASE_MS, id, LEASE_MS);
        } catch {
          // Counted per instance rather than failed; the outage is logged by reportRedisOutages.
          return local.acquire(tenantId, Math.max(0, deadline - Date.now()));
        }
        if (got === 1) {
          return async () => {
            // A slot Redis cannot take back now frees itself when its lease runs out.
            await redis.eval(RELEASE, 2, key, tenantKey, id).catch(() => {});
          };
        }
        if (Date.now() + POLL_MS > deadline) return null;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    },
  };
}
