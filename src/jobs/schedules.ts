// Tasks this process runs on a timer while the queue is started (auto-sync, cleanup), never two
// runs of one task at once.
import type { QueueState } from './state.js';

export interface Schedule {
  name: string;
  everyMs: number;
  task: () => Promise<void>;
  timer?: NodeJS.Timeout;
}

/** Runs the task every `everyMs`, skipping a turn while the last run is still going. */
export function startSchedule(state: Pick<QueueState, 'warnFailed'>, entry: Schedule): void {
  clearInterval(entry.timer);
  let busy = false;
  entry.timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      await entry.task();
    } catch (error) {
      state.warnFailed({ schedule: entry.name }, 'scheduled task failed', error);
    } finally {
      busy = false;
    }
  }, entry.everyMs);
  entry.timer.unref();
}
