// Which simulated turns declined: the simulations' engine reports its "don't know" path here
// instead of to the knowledge-gap queue (see ./index.ts), and the runner reads it per turn.

/**
 * Input messages for which the engine took its "don't know" path. The simulations' engine is
 * given this as its knowledge-gap sink, so simulated questions never reach the knowledge-gap
 * queue and the runner learns which turns declined.
 */
export function createDeclinedTracker(max = 10_000) {
  const ids = new Set<string>();
  return {
    record(messageId: string | undefined) {
      if (!messageId) return;
      if (ids.size >= max) ids.clear();
      ids.add(messageId);
    },
    take(messageId: string | null): boolean {
      if (!messageId) return false;
      return ids.delete(messageId);
    },
  };
}
export type DeclinedTracker = ReturnType<typeof createDeclinedTracker>;
