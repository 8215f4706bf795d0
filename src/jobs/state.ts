// What the queue's parts share: its settings, the handlers registered, the lanes, and the jobs
// this process runs.
import type { Db } from '../db/index.js';
import type { Lane, LaneSlot } from './lanes.js';
import type { JobHandler, JobKindOptions, JobLog } from './types.js';

export interface QueueSettings {
  pollMs: number;
  concurrency: number;
  leaseMs: number;
  backoffMs: number;
  maxBackoffMs: number;
  stopGraceMs: number;
}

/** A job this process runs: the end of its run, and how to abort its handler. */
export interface RunningJob extends LaneSlot {
  promise: Promise<void>;
  abort: AbortController;
}

export interface QueueState {
  db: Db;
  log: JobLog;
  cfg: QueueSettings;
  handlers: Map<string, JobHandler>;
  kindOptions: Map<string, JobKindOptions>;
  lanes: Lane[];
  laneOf: (kind: string) => Lane;
  running: Map<string, RunningJob>;
  /** Between `start()` and `stop()`: the queue polls and runs its schedules. */
  started: boolean;
  pollTimer: NodeJS.Timeout | undefined;
  /** A poll, heartbeat or schedule that failed. */
  warnFailed: (fields: object, message: string, error: unknown) => void;
}
