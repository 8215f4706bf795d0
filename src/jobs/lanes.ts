// Lanes and fair slots: each lane claims only its own kinds up to its own concurrency, and within
// a lane a tenant at its cap is passed over, one past its share only when no other tenant's job is due.
import type { Claim, JobLane } from './types.js';

export interface Lane {
  name: string;
  concurrency: number;
  tenantConcurrency: number | undefined;
  tenantShare: number | undefined;
  /** A poll of this lane is under way: another one would only claim past its concurrency. */
  polling: boolean;
}

/** What the lanes need to know of a job this process runs. */
export interface LaneSlot {
  lane: Lane;
  tenantId: string;
}

export interface Lanes {
  /** The default lane first. */
  lanes: Lane[];
  /** The lane that claims a kind: the one naming it, or the default one. */
  laneOf: (kind: string) => Lane;
}

const isCount = (n: number) => Number.isInteger(n) && n >= 1;

/**
 * The default lane (`concurrency` workers, a tenant share of `tenantShare` or half of them) and
 * the `extra` ones; refuses a count below 1 and a kind two lanes name.
 */
export function buildLanes(concurrency: number, tenantShare: number | undefined, extra: JobLane[]): Lanes {
  if (tenantShare !== undefined && !isCount(tenantShare)) {
    throw new Error(`the default job lane needs a tenant share of at least 1, got ${tenantShare}`);
  }
  const defaultLane: Lane = {
    name: 'default',
    concurrency,
    tenantConcurrency: undefined,
    tenantShare: tenantShare ?? Math.ceil(concurrency / 2),
    polling: false,
  };
  const lanes = [defaultLane];
  const laneOfKind = new Map<string, Lane>();
  for (const { name, kinds, concurrency, tenantConcurrency, tenantShare } of extra) {
    if (!isCount(concurrency)) {
      throw new Error(`job lane '${name}' needs a concurrency of at least 1, got ${concurrency}`);
    }
    if (tenantConcurrency !== undefined && !isCount(tenantConcurrency)) {
      throw new Error(`job lane '${name}' needs a tenant concurrency of at least 1, got ${tenantConcurrency}`);
    }
    if (tenantShare !== undefined && !isCount(tenantShare)) {
      throw new Error(`job lane '${name}' needs a tenant share of at least 1, got ${tenantShare}`);
    }
    const lane: Lane = { name, concurrency, tenantConcurrency, tenantShare, polling: false };
    lanes.push(lane);
    for (const kind of kinds) {
      if (laneOfKind.has(kind)) throw new Error(`job kind '${kind}' is named by two lanes`);
      laneOfKind.set(kind, lane);
    }
  }
  return { lanes, laneOf: (kind) => laneOfKind.get(kind) ?? defaultLane };
}

/** The lane's slots taken by the jobs this process runs. */
export function busySlots(running: ReadonlyMap<string, LaneSlot>, lane: Lane): number {
  return [...running.values()].filter((r) => r.lane === lane).length;
}

/** The tenants already running `limit` of this lane's jobs. */
function runningAtLeast(running: ReadonlyMap<string, LaneSlot>, lane: Lane, limit: number | undefined): string[] {
  if (limit === undefined) return [];
  const counts = new Map<string, number>();
  for (const r of running.values()) {
    if (r.lane === lane) counts.set(r.tenantId, (counts.get(r.tenantId) ?? 0) + 1);
  }
  return [...counts].filter(([, n]) => n >= limit).map(([tenantId]) => tenantId);
}

/**
 * Claims the lane's next job with `claim`, passing over the tenants to skip: tenants under their
 * share first; a tenant past it (under its cap) when no other's is due.
 */
export async function claimFairly(
  running: ReadonlyMap<string, LaneSlot>,
  lane: Lane,
  claim: (skipTenants: string[]) => Promise<Claim | undefined>,
): Promise<Claim | undefined> {
  const capped = runningAtLeast(running, lane, lane.tenantConcurrency);
  const shared = runningAtLeast(running, lane, lane.tenantShare).filter((tenantId) => !capped.includes(tenantId));
  return (await claim([...capped, ...shared])) ?? (shared.length > 0 ? await claim(capped) : undefined);
}
