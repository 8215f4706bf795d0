// How far V8's old generation may grow past what the last full collection kept before the next:
// chosen by database once the server knows which it has, since `npm start`'s flags are set before.
//
// V8's own growth lets the old generation reach several times what the last full collection kept
// (the row read's peak on PostgreSQL was about 185 MB). On PGlite the database lives in the
// server's own memory: 35 % keeps the peak under load near 225–245 MB (the target is 250). At 20 %
// (about 230–235 MB) the comment write on PGlite fell, in some runs on a busy machine, into a state
// it kept for the whole run: a full collection every third of a second, each pause keeping the
// requests in flight alive long enough to be moved to the old generation, which brought the next
// one sooner, and p99 near 35 ms instead of 20 (bench/README.md). On PostgreSQL, whose
// peak at 20 % is about 125 MB, 50 %: about a third fewer full collections, each of which pauses
// every request in flight, for about 10 MB. A `--heap-growing-percent` given to Node.js by whoever
// starts the server is left as it is.
//
// Set after V8 has started (`v8.setFlagsFromString`): V8 reads this flag at each full collection,
// when it computes the next limit, so it takes effect from the next one (a test counts them).

import v8 from 'node:v8';

export const HEAP_GROWING_PERCENT = { pglite: 35, postgres: 50 } as const;

/** Sets the growth for `database`, unless the process was started with one; returns what it set. */
export function tuneHeapGrowth(
  database: keyof typeof HEAP_GROWING_PERCENT,
  execArgv: readonly string[] = process.execArgv,
): number | undefined {
  if (execArgv.some((flag) => /^--heap[-_]growing[-_]percent(=|$)/.test(flag))) return undefined;
  const percent = HEAP_GROWING_PERCENT[database];
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
