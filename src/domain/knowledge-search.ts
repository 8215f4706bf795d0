// Retrieval over a tenant's knowledge: PostgreSQL full-text search over documents and their
// translations, one passage per document, in the asked language where a translation exists.
// The agent (DESIGN.md §8, rule 3) answers from the best passage; below its threshold it records
// a knowledge gap.
//
// Rank scale: `ts_rank_cd(vector, query, 32)` — cover density (how many query words, how close
// together, how often, weighted by where), mapped to r/(r + 1). So every rank lies in (0, 1),
// higher is better, and only passages matching at least one query word are returned. Weights:
// a word in the title counts 1.0, in a translation's related questions 0.4, in the body 0.2.
// Measured on short help articles:
//   one query word once in the body                 ≈ 0.17  (the page merely mentions a word)
//   two query words together, or one twice, in body ≈ 0.29
//   a query word in the title                       ≥ 0.5
// RELEVANT_RANK (0.2) separates "this passage is about the question" from "it mentions a word of
// it"; the agent answers at or above it and records a knowledge gap below (docs/knowledge.md).
import { sql } from 'kysely';
import type { Db } from '../db/client.js';
import { ALL_SEARCH_CONFIGS, anyWordsQuery, normalizeLanguage } from './text-search.js';

export interface KnowledgePassage {
  document_id: string;
  title: string;
  /** Up to ~40 words of `content` around the matched words, fragments joined by ` … `. */
  snippet: string;
  /** The whole text of the passage (the document, or its translation). */
  content: string;
  language: string;
  source_id: string | null;
  /** In (0, 1); higher is better. See the module header for the scale. */
  rank: number;
}

/** The rank at or above which a passage is about the question rather than mentioning a word of it. */
export const RELEVANT_RANK = 0.2;

const RANK_NORMALIZATION = 32;
const HEADLINE_OPTIONS =
  'StartSel="",StopSel="",MaxWords=40,MinWords=15,ShortWord=2,MaxFragments=2,FragmentDelimiter=" … "';

/**
 * Full-text search over the tenant's documents and their translations; prefers passages in
 * `language` when a translation exists. Best first. Words of `query` are OR-ed: a passage
 * matching more of them, closer together and in its title ranks higher.
 */
export async function searchKnowledge(
  db: Db,
  tenantId: string,
  query: string,
  options: { language?: string; limit?: number } = {},
): Promise<KnowledgePassage[]> {
  const text = anyWordsQuery(query);
  if (text === '') return [];
  const limit = Math.min(Math.max(Math.trunc(options.limit ?? 5), 1), 50);

  const top = await sql<{ document_id: string; rank: number }>`
    ${documentRanks(tenantId, text)} order by rank desc, document_id desc limit ${limit}
  `.execute(db);
  if (top.rows.length === 0) return [];
  const ids = top.rows.map((r) => r.document_id);

  // Every passage of the chosen documents, each ranked against the query in its own language.
  const rows = await sql<{
    document_id: string;
    is_original: boolean;
    title: string;
    content: string;
    language: string;
    source_id: string | null;
    rank: number;
    snippet: string;
  }>`
    with p as (
      select d.id as document_id, true as is_original, d.title, d.content, d.language, d.source_id,
             d.search_config, d.search_vector
      from documents d where d.tenant_id = ${tenantId} and d.id in (${sql.join(ids)})
      union all
      select t.document_id, false, t.title, t.content, t.language, d.source_id, t.search_config, t.search_vector
      from document_translations t join documents d on d.id = t.document_id and d.tenant_id = ${tenantId}
      where t.tenant_id = ${tenantId} and t.document_id in (${sql.join(ids)})
    )
    select document_id, is_original, title, content, language, source_id,
           ts_rank_cd(search_vector, websearch_to_tsquery(search_config, ${text}), ${RANK_NORMALIZATION})::float8 as rank,
           ts_headline(search_config, content, websearch_to_tsquery(search_config, ${text}), ${HEADLINE_OPTIONS}) as snippet
    from p
  `.execute(db);

  const wanted = options.language ? normalizeLanguage(options.language) : undefined;
  const wantedPrimary = wanted?.split('-')[0];
  const passages: KnowledgePassage[] = [];
  for (const { document_id, rank } of top.rows) {
    const own = rows.rows.filter((r) => r.document_id === document_id);
    const inLanguage =
      wanted === undefined
        ? undefined
        : (own.find((r) => r.language === wanted) ?? own.find((r) => r.language.split('-')[0] === wantedPrimary));
    // Otherwise the best-matching passage; on a tie, the original document.
    const best = [...own].sort((a, b) => b.rank - a.rank || Number(b.is_original) - Number(a.is_original))[0];
    const chosen = inLanguage ?? best;
    if (!chosen) continue;
    passages.push({
      document_id,
      title: chosen.title,
      snippet: chosen.snippet,
      content: chosen.content,
      language: chosen.language,
      source_id: chosen.source_id,
      rank: toRank(rank),
    });
  }
  return passages;
}

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

/** rank/(rank + 1) is already applied by normalization 32; round away float noise. */
const toRank = (value: number): number => Math.round(Number(value) * 1e6) / 1e6;
