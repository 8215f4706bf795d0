// Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): lists ranked by different means
// (BM25's lexical ranking, the embeddings' cosine similarity) made one without comparing their
// scores, which do not share a scale. An id at rank r (1 the best) of a list adds 1 / (k + r);
// with k = 60 the top ranks of either list weigh a little more than the rest, and an id both
// lists rank well comes first.

/** The constant of reciprocal rank fusion. */
export const RRF_K = 60;

/**
 * Each id's fused score, best first (ties in the order the ids first appear, the lexical list
 * first). An id repeated within one list counts at its best rank only.
 */
export function fuseRanks(lexical: string[], semantic: string[], k = RRF_K): Map<string, number> {
  if (!Number.isFinite(k) || k < 0) throw new RangeError(`k must be a finite number of at least 0, got ${k}`);
  const scores = new Map<string, number>();
  for (const list of [lexical, semantic]) {
    const seen = new Set<string>();
    list.forEach((id, index) => {
      if (seen.has(id)) return;
      seen.add(id);
      scores.set(id, (scores.get(id) ?? 0) + 1 / (k + index + 1));
    });
  }
  return new Map([...scores].sort((a, b) => b[1] - a[1]));
}
