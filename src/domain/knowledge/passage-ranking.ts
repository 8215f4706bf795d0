// BM25 over a tenant's passages, in one SQL statement (docs/knowledge.md, "How the agent finds
// answers"). A question is parsed by each language configuration the tenant's knowledge uses
// (stemming and stop words), its filler words ("how do I…", src/domain/knowledge/question-words.ts) taken
// out; each remaining word weighs by its rarity in the tenant's passages (inverse document
// frequency, from `knowledge_terms`), and each passage scores
//
//   Σ idf(w) · tf(w)·(k1 + 1) / (tf(w) + k1·(1 − b + b·length / average length))
//
// where tf counts a word 1.5 times in the document's title and in the passage's headings (and a
// translation's related questions) and once in its body (BM25F; k1 = 1.2, b = 0.5, tuned on the
// benchmark's tuning corpus: bench/answers).
// The score is divided by what a passage holding every word of the question would score at most,
// Σ idf(w)·(k1 + 1), so it lies in [0, 1): the share of the question's information the passage
// holds. A word the tenant's knowledge never uses counts in that sum with the highest weight, so a
// question about something the knowledge does not cover scores low and is declined.
//
// Candidates are the passages holding one of the question's words; words held by more than a tenth
// of the passages only score, so a common word does not make every passage a candidate. Of the
// candidates, the 500 that PostgreSQL's own `ts_rank` puts first (in C, cheap) are scored by BM25:
// this bounds the statement's work as a workspace grows (p95 45 ms at 100,000 passages on
// PostgreSQL against 92 ms scoring 4,000, bench/README.md), with as many right first citations on
// the tuning corpus (99 of 192 either way).
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { CARD_PLACEHOLDER, EMAIL_PLACEHOLDER, PHONE_PLACEHOLDER } from '../simulations/pii.js';
import { mayBeCompound, splitCompounds } from './compounds.js';
import { FILLER_BY_CONFIG } from './question-words.js';

/**
 * The ranking's constants: BM25's k1 and b; the weights of a word in the title (field A) and in the
 * headings and related questions (B), a body word weighing 1; the share of passages above which a
 * word is too common to make a passage a candidate; how many candidates BM25 scores; and the
 * passages a word's rarity is counted against at least. A small help centre (three articles, ten
 * passages) says little about which words are rare: weighed against its own size, a word in one of
 * its passages would weigh a fraction of a word it never uses, and every question would be
 * declined. Counted against at least a thousand passages, as if the knowledge sat in a larger
 * collection that holds none of the question's words, a word the knowledge uses weighs nearly as
 * much as one it does not.
 */
const RANKING = {
  k1: 1.2,
  b: 0.5,
  titleWeight: 1.5,
  headingWeight: 1.5,
  commonShare: 0.1,
  maxCandidates: 500,
  priorPassages: 1000,
} as const;

export interface RankedPassage {
  passage_id: string;
  document_id: string;
  translation_id: string | null;
  language: string;
  ordinal: number;
  heading: string;
  content: string;
  search_config: string;
  /** In [0, 1): the share of the question's information the passage holds. */
  score: number;
  /** How many words the question has (as this passage's language reads it), and how many the passage holds. */
  words: number;
  matched: number;
  /** In [0, 1]: the share of the question's weight (Σ idf) in the words it holds, however often. */
  held: number;
}

/**
 * A question replayed from a conversation (a simulation case imported from one) has its personal
 * data replaced by placeholders; like the data itself (INCIDENTAL), they name no topic.
 */
const PLACEHOLDERS = [EMAIL_PLACEHOLDER, CARD_PLACEHOLDER, PHONE_PLACEHOLDER];
const withoutPlaceholders = (question: string): string =>
  PLACEHOLDERS.reduce((text, placeholder) => text.replaceAll(placeholder, ' '), question);

/** Numbers and e-mail addresses, as the parser leaves them. */
const INCIDENTAL = /^[+#]?[\d.,:/-]+$|@/;

/** A word of the question in one configuration, with its weight. */
interface Word {
  term: string;
  /** Passages of the tenant holding it, in that configuration. */
  df: number;
  idf: number;
}

/** The question as one configuration reads it, with that configuration's statistics. */
interface Reading {
  config: string;
  passages: number;
  averageLength: number;
  words: Word[];
}

/**
 * The best `limit` passages for `question`, best first, in every language configuration the
 * tenant's passages use (a question asked in English finds an English document that has a French
 * translation; the caller picks the passage to quote).
 */
export async function rankPassages(
  db: Db,
  tenantId: string,
  question: string,
  options: { limit: number },
): Promise<RankedPassage[]> {
  const readings = await readQuestion(db, tenantId, withoutPlaceholders(question));
  const ranked: RankedPassage[] = [];
  for (const reading of readings) ranked.push(...(await scorePassages(db, tenantId, reading, options.limit)));
  return ranked.sort((a, b) => b.score - a.score).slice(0, options.limit);
}

/**
 * The question's words in each configuration the tenant's passages use, filler words taken out,
 * each with its document frequency.
 */
async function readQuestion(db: Db, tenantId: string, question: string) {
  const rows = await sql<{ config: string; passages: number; total_length: string; term: string; df: number | null }>`
    with configs as (
      select s.search_config, s.passages, s.total_length from knowledge_stats s
      where s.tenant_id = ${tenantId} and s.passages > 0
    ),
    words as (
      select c.search_config, c.passages, c.total_length, w.term
      from configs c cross join lateral unnest(tsvector_to_array(to_tsvector(c.search_config, ${question}))) as w(term)
      where w.term <> all (tsvector_to_array(to_tsvector(c.search_config,
                                                          coalesce(${JSON.stringify(FILLER_BY_CONFIG)}::jsonb ->> c.search_config::text, ''))))
    )
    select w.search_config::text as config, w.passages, w.total_length::text, w.term, k.passages as df
    from words w
    left join knowledge_terms k on k.tenant_id = ${tenantId} and k.search_config = w.search_config and k.term = w.term
  `.execute(db);
  const readings = new Map<string, Reading>();
  for (const row of rows.rows) {
    let reading = readings.get(row.config);
    if (!reading) {
      reading = {
        config: row.config,
        passages: row.passages,
        averageLength: Number(row.total_length) / row.passages,
        words: [],
      };
      readings.set(row.config, reading);
    }
    const df = Math.max(row.df ?? 0, 0);
    // A number or an address the knowledge never mentions (an order number, a phone number, the
    // customer's e-mail) names no topic: it would only make every passage look less relevant. Nor
    // does a number of one or two digits anywhere ("3 days", "item 12"): only a longer one the
    // knowledge uses (an error code, a year, a model) is a word of the question.
    if ((df === 0 && INCIDENTAL.test(row.term)) || /^\+?\d{1,2}$/.test(row.term)) continue;
    // A hyphenated word is read whole and in its parts ("show-me": "show-me", "show", "me"); one
    // the knowledge never uses whole would count its parts' weight twice, as a word unknown.
    if (df === 0 && row.term.includes('-')) continue;
    reading.words.push(weighed(reading, row.term, df));
  }
  for (const reading of readings.values()) await readCompounds(db, tenantId, reading);
  return [...readings.values()];
}

/** A word of a reading with its weight: its rarity among the tenant's passages. */
function weighed(reading: Reading, term: string, df: number): Word {
  const n = Math.max(reading.passages, RANKING.priorPassages);
  return { term, df, idf: Math.log(1 + (n - df + 0.5) / (df + 0.5)) };
}

/** A reading's unknown compounds replaced by the two known words they join (src/domain/knowledge/compounds.ts). */
async function readCompounds(db: Db, tenantId: string, reading: Reading): Promise<void> {
  const compounds = reading.words.filter((w) => w.df === 0 && mayBeCompound(reading.config, w.term)).map((w) => w.term);
  if (compounds.length === 0) return;
  const split = await splitCompounds(db, tenantId, reading.config, compounds);
  if (split.size === 0) return;
  const words: Word[] = [];
  for (const word of reading.words) {
    const halves = split.get(word.term);
    if (!halves) words.push(word);
    else for (const half of halves) words.push(weighed(reading, half.term, half.df));
  }
  reading.words = words.filter((w, i) => words.findIndex((other) => other.term === w.term) === i);
}

/** One configuration's candidates scored by BM25F, best first. */
async function scorePassages(db: Db, tenantId: string, reading: Reading, limit: number): Promise<RankedPassage[]> {
  const known = reading.words.filter((w) => w.df > 0);
  if (known.length === 0) return [];
  const rare = known.filter((w) => w.df <= reading.passages * RANKING.commonShare);
  const query = (rare.length > 0 ? rare : known)
    .map((w) => `'${w.term.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`)
    .join(' | ');
  const weight = reading.words.reduce((sum, w) => sum + w.idf, 0);
  const best = weight * (RANKING.k1 + 1);
  const { k1, b, titleWeight, headingWeight } = RANKING;
  const result = await sql<RankedPassage>`
    with candidates as materialized (
      select p.id, p.search_vector, p.length from knowledge_passages p
      where p.tenant_id = ${tenantId} and p.search_config = ${reading.config}::regconfig
        and p.search_vector @@ ${query}::tsquery
      order by ts_rank(p.search_vector, ${query}::tsquery) desc
      limit ${sql.lit(RANKING.maxCandidates)}
    ),
    frequencies as (
      select c.id, c.length, u.lexeme,
             sum(case x.weight when 'A' then ${sql.lit(titleWeight)} when 'B' then ${sql.lit(headingWeight)} else 1 end) as tf
      from candidates c
      cross join lateral unnest(c.search_vector) as u
      cross join lateral unnest(u.weights) as x(weight)
      where u.lexeme = any (${known.map((w) => w.term)}::text[])
      group by c.id, c.length, u.lexeme
    ),
    scored as (
      select f.id, sum(w.idf * f.tf * ${sql.lit(k1 + 1)}
                       / (f.tf + ${sql.lit(k1)} * (1 - ${sql.lit(b)} + ${sql.lit(b)} * f.length / ${sql.lit(reading.averageLength)}))) as score,
             count(*) as matched, sum(w.idf) as held
      from frequencies f
      join unnest(${known.map((w) => w.term)}::text[], ${known.map((w) => w.idf)}::float8[]) as w(term, idf) on w.term = f.lexeme
      group by f.id
      order by score desc, f.id
      limit ${limit}
    )
    select p.id::text as passage_id, p.document_id, p.translation_id, p.language, p.ordinal, p.heading, p.content,
           p.search_config::text as search_config, s.score / ${sql.lit(best)} as score,
           ${sql.lit(reading.words.length)}::int as words, s.matched::int as matched, s.held / ${sql.lit(weight)} as held
    from scored s join knowledge_passages p on p.id = s.id
    order by s.score desc, p.id
  `.execute(db);
  return result.rows.map((row) => ({
    ...row,
    score: Number(row.score),
    matched: Number(row.matched),
    held: Number(row.held),
  }));
}
