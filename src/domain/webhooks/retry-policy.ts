// When a failed delivery is tried again, and when an endpoint is given up on:
// exponential backoff from `baseMs`, doubling per attempt up to `maxMs`, for 24 hours after the
// event (or after a replay); an endpoint whose deliveries have failed for 5 days in a row, with
// no success in between, is disabled with a `disabled_reason`.

export interface RetryPolicy {
  /** Delay after the first failed attempt; doubles with each attempt. */
  baseMs: number;
  /** Longest delay between two attempts. */
  maxMs: number;
  /** How long after the event (or a replay) a delivery is still retried. */
  windowMs: number;
  /** An endpoint failing this long without a success is disabled. */
  disableAfterMs: number;
}

const HOUR = 3_600_000;

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  baseMs: 30_000,
  maxMs: 4 * HOUR,
  windowMs: 24 * HOUR,
  disableAfterMs: 5 * 24 * HOUR,
};

/** The wait before the next attempt, after `attempts` failed ones (1 or more). */
export function retryDelay(policy: RetryPolicy, attempts: number): number {
  const exponent = Math.min(Math.max(attempts - 1, 0), 40);
  return Math.min(policy.baseMs * 2 ** exponent, policy.maxMs);
}
