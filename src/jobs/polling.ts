// The polling loop: every `pollMs` (and at once when a job is added), each lane claims and starts
// jobs while it has free slots.
import { claimDue } from './claim.js';
import { describe } from './errors.js';
import { busySlots, claimFairly, type Lane } from './lanes.js';
import { runJob } from './run.js';
import type { QueueState } from './state.js';

/** Claims and starts jobs while a lane has free slots; the lanes fill theirs side by side. */
export async function poll(state: QueueState): Promise<void> {
  await Promise.all(state.lanes.map((lane) => fill(state, lane)));
}

async function fill(state: QueueState, lane: Lane): Promise<void> {
  if (lane.polling) return;
  lane.polling = true;
  const { running } = state;
  const kinds = [...state.handlers.keys()].filter((kind) => state.laneOf(kind) === lane);
  try {
    while (state.started && busySlots(running, lane) < lane.concurrency) {
      const claimed = await claimFairly(running, lane, (skipTenants) =>
        claimDue(state.db, state.cfg.leaseMs, kinds, skipTenants),
      );
      if (!claimed) break;
      const entry = runJob(state, claimed).catch((error) =>
        state.log.error({ job_id: claimed.job.id, err: describe(error) }, 'job bookkeeping failed'),
      );
      const slot = running.get(claimed.job.id);
      if (slot) slot.promise = entry;
    }
  } catch (error) {
    state.warnFailed({ lane: lane.name }, 'job poll failed', error);
  } finally {
    lane.polling = false;
  }
}

/** Polls after `delay`, then every `pollMs`, while the queue is started. */
export function schedulePoll(state: QueueState, delay: number): void {
  if (!state.started) return;
  clearTimeout(state.pollTimer);
  state.pollTimer = setTimeout(async () => {
    await poll(state);
    schedulePoll(state, state.cfg.pollMs);
  }, delay);
  state.pollTimer.unref();
}
