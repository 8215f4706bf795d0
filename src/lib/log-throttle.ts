// A warning that can repeat for every request (an upstream service down) written at most once a
// minute per kind, the next line saying how many were left out: the log says what is wrong and
// that it goes on without a line per request. Counters (the metrics) still count every one.

/** Writes the line if none of its kind was written in the interval; else counts it as left out. */
export type ThrottledLine = (kind: string, fields: Record<string, unknown>, message: string) => void;

/**
 * A writer of `write(fields, message)` lines, at most one per `kind` each `intervalMs`; a line
 * written after some were left out carries their number as `repeated`.
 */
export function throttledLine(
  write: (fields: Record<string, unknown>, message: string) => void,
  intervalMs = 60_000,
  now: () => number = Date.now,
): ThrottledLine {
  const kinds = new Map<string, { writtenAt: number; leftOut: number }>();
  return (kind, fields, message) => {
    const at = now();
    const seen = kinds.get(kind);
    if (seen !== undefined && at - seen.writtenAt < intervalMs) {
      seen.leftOut++;
      return;
    }
    write(seen?.leftOut ? { ...fields, repeated: seen.leftOut } : fields, message);
    kinds.set(kind, { writtenAt: at, leftOut: 0 });
  };
}
