// Retrieval over a tenant's knowledge for the agent: its passages ranked by BM25
// (src/domain/knowledge/passage-ranking.ts), the best passage of each document, in the asked language where
// a translation has one. The agent (DESIGN.md §8, rule 3) answers from the best passage; below
// its threshold it declines and records a knowledge gap (docs/knowledge.md).
//
// Rank scale: the share of the question's information a passage holds, in [0, 1): every word of
// the question weighs by its rarity in the tenant's passages, words the knowledge never uses
// included, so a question about something else scores low; and 0 when the best passage holds one
// word of a longer question (canAnswer). RELEVANT_RANK is calibrated on questions the knowledge
// does not answer (bench/answers: at most 2 in 10 of them answered).
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { type RankedPassage, rankPassages } from './passage-ranking.js';
import { ALL_SEARCH_CONFIGS, normalizeLanguage } from './text-search.js';

export interface KnowledgePassage {
  document_id: string;
  title: string;
  /** The passage's words around the question's, up to ~40, fragments joined by ` … `. */
  snippet: string;
  /** The passage's text: a section of its document (or translation), a few paragraphs at most. */
  content: string;
  /** The passage's headings, outermost first, joined by ` > ` ('' before the first heading). */
  heading: string;
  language: string;
  source_id: string | null;
  /** For a page read from a website: its URL; null for other documents. */
  url: string | null;
  /** In [0, 1); higher is better. See the module header for the scale. */
  rank: number;
}

/** The rank at or above which a passage answers the question rather than sharing a word with it. */
export const RELEVANT_RANK = 0.079;

/** Passages ranked before they are gathered by document: enough for `limit` documents. */
export const PASSAGES_PER_DOCUMENT = 8;

/**
 * A document's rank from its passages' scores, best first: its best passage, and half its second
 * and a quarter of its third, so a document answering the question in several places ranks above
 * one that mentions its words once; divided by 1.75 to stay in [0, 1).
 */
export const documentRank = (scores: number[]): number =>
  ((scores[0] ?? 0) + 0.5 * (scores[1] ?? 0) + 0.25 * (scores[2] ?? 0)) / 1.75;

/**
 * Whether a passage can answer the question at all: a question of three words or more needs two
 * of them in the passage, or half its weight (one word that says most of it). A passage sharing a
 * single word with a longer question ("what time do banks open on Saturdays" and a page on the
 * time a file was opened) is about something else, however rare the word. A question of one or
 * two words is judged by the rank alone. On the answer benchmark's tuning corpus this declines
 * all but 2 of 48 off-topic questions and keeps the right answers (bench/README.md).
 */
export const canAnswer = (passage: Pick<RankedPassage, 'words' | 'matched' | 'held'>): boolean =>
  passage.words <= 2 || passage.matched >= 2 || passage.held >= 0.5;

/** A document's lexical rank from its passages, best first: documentRank, or 0 when its best passage cannot answer. */
export const lexicalRank = (passages: RankedPassage[]): number =>
  passages[0] && canAnswer(passages[0]) ? documentRank(passages.map((p) => p.score)) : 0;

const HEADLINE_OPTIONS =
  'StartSel="",StopSel="",MaxWords=40,MinWords=15,ShortWord=2,MaxFragments=2,FragmentDelimiter=" … "';

/** A document found for a question: the passage quoted from it, and its rank (see the module header). */
export interface RankedDocument {
  passage: RankedPassage;
  rank: number;
}

/** How many documents a search answers: `limit`, 5 unless given, within [1, 50]. */
export const documentLimit = (limit: number | undefined): number => Math.min(Math.max(Math.trunc(limit ?? 5), 1), 50);

/**
 * The best passage of each of the `limit` best documents for `query`, best first. With
 * `language`, a document that has a translation in it (or in its primary language, `fr` for
 * `fr-CA`) is quoted from the translation: its passage that matched, or the one in the same place.
 */
export async function searchKnowledge(
  db: Db,
  tenantId: string,
  query: string,
  options: { language?: string; limit?: number } = {},
): Promise<KnowledgePassage[]> {
  if (query.trim() === '') return [];
  const limit = documentLimit(options.limit);
  const ranked = await rankPassages(db, tenantId, query, { limit: limit * PASSAGES_PER_DOCUMENT });
  return quoteDocuments(db, tenantId, query, lexicalDocuments(ranked, limit), options.language);
}

/** Passages gathered by document, in the order the documents first appear, each list in its given order. */
export function byDocument(passages: RankedPassage[]): Map<string, RankedPassage[]> {
  const grouped = new Map<string, RankedPassage[]>();
  for (const passage of passages) {
    const held = grouped.get(passage.document_id);
    if (held) held.push(passage);
    else grouped.set(passage.document_id, [passage]);
  }
  return grouped;
}

/** The `limit` best documents of lexically ranked passages, each quoted at its best passage. */
export function lexicalDocuments(ranked: RankedPassage[], limit: number): RankedDocument[] {
  return [...byDocument(ranked).values()]
    .map((passages) => ({ passage: passages[0] as RankedPassage, rank: lexicalRank(passages) }))
    .sort((a, b) => b.rank - a.rank)
    .slice(0, limit);
}

/** Each document as the agent reads it, in the given order: the quoted passage (translated if asked) and its rank. */
export async function quoteDocuments(
  db: Db,
  tenantId: string,
  query: string,
  best: RankedDocument[],
  language: string | undefined,
): Promise<KnowledgePassage[]> {
  if (best.length === 0) return [];
  const wanted = language ? normalizeLanguage(language) : null;
  const quoted = await quotedPassages(
    db,
    tenantId,
    query,
    best.map((b) => b.passage),
    wanted,
  );
  return best.flatMap(({ passage, rank }) => {
    const quote = quoted.get(passage.passage_id);
    if (!quote) return [];
    return [{ ...quote, document_id: passage.document_id, rank: toRank(rank) }];
  });
}

/**
 * For each matched passage, what is quoted: the passage itself, or with `wanted`, the passage in
 * that language in the same place of the document (the nearest ordinal), with the title and
 * snippet in that language.
 */
async function quotedPassages(
  db: Db,
  tenantId: string,
  query: string,
  matched: RankedPassage[],
  wanted: string | null,
) {
  const primary = wanted?.split('-')[0] ?? null;
  const rows = await sql<{ matched_id: string } & Omit<KnowledgePassage, 'document_id' | 'rank'>>`
    with matched as (
      select * from unnest(${matched.map((m) => m.passage_id)}::bigint[], ${matched.map((m) => m.document_id)}::uuid[],
                           ${matched.map((m) => m.ordinal)}::int[], ${matched.map((m) => m.language)}::text[])
        as m(id, document_id, ordinal, language)
    )
    select m.id::text as matched_id, coalesce(t.title, d.title) as title, p.content, p.heading, p.language, d.source_id, d.url,
           ts_headline(p.search_config, p.content, plainto_tsquery(p.search_config, ${query}), ${HEADLINE_OPTIONS}) as snippet
    from matched m
    join documents d on d.id = m.document_id and d.tenant_id = ${tenantId}
    cross join lateral (
      select q.* from knowledge_passages q
      where q.tenant_id = ${tenantId} and q.document_id = m.document_id
        and (q.id = m.id or (${wanted}::text is not null and m.language <> ${wanted}::text
                             and (q.language = ${wanted}::text or split_part(q.language, '-', 1) = ${primary}::text)))
      order by (q.language = ${wanted}::text) desc nulls last, (split_part(q.language, '-', 1) = ${primary}::text) desc nulls last,
               (q.id <> m.id), abs(q.ordinal - m.ordinal), q.ordinal
      limit 1
    ) p
    left join document_translations t on t.id = p.translation_id
  `.execute(db);
  return new Map(rows.rows.map(({ matched_id, ...quote }) => [matched_id, quote]));
}

/** `ts_rank_cd`'s normalisation 32: rank/(rank + 1), so a list's ranks lie in (0, 1). */
const RANK_NORMALIZATION = 32;

/**
 * `select document_id, rank` for every document of the tenant whose text or a translation matches
 * `text` (websearch syntax), ranked by its best passage. The query is parsed with each
 * configuration in use and each passage is matched against the parse of its own language; the
 * join on the configuration keeps the GIN indexes usable.
 */
export function documentRanks(tenantId: string, text: string, options: { sourceId?: string | undefined } = {}) {
  const configs = sql.join(ALL_SEARCH_CONFIGS.map((c) => sql`${sql.lit(c)}::regconfig`));
  const bySource = (column: string) =>
    options.sourceId === undefined ? sql`` : sql`and ${sql.ref(column)} = ${options.sourceId}`;
  return sql<{ document_id: string; rank: number }>`
    with q as (
      select cfg, websearch_to_tsquery(cfg, ${text}) as query from unnest(array[${configs}]) as cfg
    ),
    passages as (
      select d.id as document_id, ts_rank_cd(d.search_vector, q.query, ${RANK_NORMALIZATION}) as rank
      from documents d join q on q.cfg = d.search_config
      where d.tenant_id = ${tenantId} and d.search_vector @@ q.query ${bySource('d.source_id')}
      union all
      select t.document_id, ts_rank_cd(t.search_vector, q.query, ${RANK_NORMALIZATION})
      from document_translations t join q on q.cfg = t.search_config
        join documents d on d.id = t.document_id and d.tenant_id = ${tenantId}
      where t.tenant_id = ${tenantId} and t.search_vector @@ q.query ${bySource('d.source_id')}
    )
    select document_id, max(rank)::float8 as rank from passages group by document_id
  `;
}

/** Rounds away float noise. */
const toRank = (value: number): number => Math.round(Number(value) * 1e6) / 1e6;
