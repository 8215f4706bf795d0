// Compound words of German and Dutch that the knowledge never uses whole, read as the two words
// it does use: a customer asks about "Netzwerkprotokolle" where the manual writes "Protokolle
// des Netzwerks". PostgreSQL's stemmers do not split compounds; this splits a question's unknown
// compound at the point where both halves are words of the tenant's own passages, so it needs no
// dictionary and splits nothing the knowledge could not match anyway.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';

/** The text-search configurations of languages that write compounds as one word. */
const COMPOUNDING = new Set(['german', 'dutch']);

/** The shortest compound (as stemmed) worth splitting, and the shortest half. */
const MIN_COMPOUND = 8;
const MIN_PART = 3;

/** A word of the tenant's passages, with the number of passages holding it. */
export interface KnownWord {
  term: string;
  df: number;
}

/** Whether a stemmed word of a question read by `config` may be a compound worth splitting. */
export const mayBeCompound = (config: string, term: string): boolean =>
  COMPOUNDING.has(config) && term.length >= MIN_COMPOUND && /^\p{L}+$/u.test(term);

/** The ways to cut `term` in two, the longest right half first: the left half as written and without a linking "s". */
function cuts(term: string): { left: string[]; right: string }[] {
  const found = [];
  for (let at = MIN_PART; at <= term.length - MIN_PART; at++) {
    const left = term.slice(0, at);
    found.push({
      left: left.endsWith('s') && left.length > MIN_PART ? [left, left.slice(0, -1)] : [left],
      right: term.slice(at),
    });
  }
  return found;
}

/**
 * Each of `terms` (unknown compounds of one configuration) that splits into two words of the
 * tenant's passages in `config`, with those two words; the cut keeping the longer right half (the
 * compound's head, which names the thing) wins. Halves are stemmed as words of their own.
 */
export async function splitCompounds(
  db: Db,
  tenantId: string,
  config: string,
  terms: string[],
): Promise<Map<string, [KnownWord, KnownWord]>> {
  const halves = [...new Set(terms.flatMap((term) => cuts(term).flatMap((cut) => [...cut.left, cut.right])))];
  if (halves.length === 0) return new Map();
  const rows = await sql<{ half: string; term: string; df: number }>`
    select h.half, s.term, k.passages as df
    from unnest(${halves}::text[]) as h(half)
    cross join lateral unnest(tsvector_to_array(to_tsvector(${config}::regconfig, h.half))) as s(term)
    join knowledge_terms k on k.tenant_id = ${tenantId} and k.search_config = ${config}::regconfig
                          and k.term = s.term and k.passages > 0
  `.execute(db);
  const known = new Map(rows.rows.map((row) => [row.half, { term: row.term, df: Number(row.df) }]));
  const split = new Map<string, [KnownWord, KnownWord]>();
  for (const term of terms) {
    for (const cut of cuts(term)) {
      const left = cut.left.map((half) => known.get(half)).find((word) => word !== undefined);
      const right = known.get(cut.right);
      if (left && right && left.term.length >= MIN_PART && right.term.length >= MIN_PART) {
        split.set(term, [left, right]);
        break;
      }
    }
  }
  return split;
}
