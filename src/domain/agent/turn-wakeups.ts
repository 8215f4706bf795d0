// In-process wake-ups for turns waiting on client results: results sent to this process wake their
// turn at once (results sent to another instance are noticed by ./turn-places.ts, which wakes it too).

export interface TurnWakeups {
  /** Wakes every wait of the message's turn. */
  notify(messageId: string): void;
  /** Resolves after `ms`, or earlier when the message's turn is woken or `signal` aborts. */
  sleep(messageId: string, ms: number): Promise<void>;
}

export function createTurnWakeups(signal: AbortSignal): TurnWakeups {
  const waiters = new Map<string, Set<() => void>>();

  function notify(messageId: string) {
    for (const wake of waiters.get(messageId) ?? []) wake();
  }

  function sleep(messageId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const set = waiters.get(messageId) ?? new Set();
      waiters.set(messageId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) waiters.delete(messageId);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  return { notify, sleep };
}
