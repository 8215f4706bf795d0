// Retrieval when an embeddings model is configured (docs/knowledge.md, "Semantic retrieval"): the
// tenant's passages ranked lexically (BM25, src/domain/knowledge/passage-ranking.ts) and by the
// cosine similarity of their vectors to the question's, the two rankings fused by reciprocal rank
// fusion, then gathered by document as the lexical search does (src/domain/knowledge/search.ts).
//
// The order is the fused one. A document's rank, which the agent compares with RELEVANT_RANK, is
// the higher of its lexical rank and its best passage's similarity on the lexical scale: mapped so
// that EMBEDDINGS_MIN_SIMILARITY lands exactly on RELEVANT_RANK, so "answer or decline" stays one
// comparison, each half judged against a threshold calibrated on off-topic questions.
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { fuseRanks } from './embeddings/fusion.js';
import { type QuestionEmbedding, type VectorRank, vectorRankPassages } from './embeddings/vector-ranking.js';
import type { RankedPassage } from './passage-ranking.js';
import { rankPassages } from './passage-ranking.js';
import {
  byDocument,
  documentLimit,
  documentRank,
  type KnowledgePassage,
  lexicalDocuments,
  lexicalRank,
  PASSAGES_PER_DOCUMENT,
  quoteDocuments,
  type RankedDocument,
  RELEVANT_RANK,
} from './search.js';

/** The highest rank a similarity maps to: the lexical scale is [0, 1). */
const MAX_RANK = 0.999999;

/**
 * A cosine similarity on the lexical rank scale, piecewise linear: [0, minSimilarity] onto
 * [0, RELEVANT_RANK] and [minSimilarity, 1] onto [RELEVANT_RANK, 1), so `minSimilarity` maps to
 * RELEVANT_RANK exactly and a passage identical to the question ranks as one holding all its words.
 */
export function similarityRank(similarity: number, minSimilarity: number): number {
  if (similarity < minSimilarity) return Math.max(0, (RELEVANT_RANK * similarity) / minSimilarity);
  const above = (similarity - minSimilarity) / (1 - minSimilarity);
  return Math.min(RELEVANT_RANK + (1 - RELEVANT_RANK) * above, MAX_RANK);
}

/**
 * The best passage of each of the `limit` best documents for `query`, in fused order, quoted as
 * searchKnowledge quotes them. With no vector to compare (none stored yet for the tenant), it is
 * searchKnowledge's answer exactly.
 */
export async function fusedSearchKnowledge(
  db: Db,
  tenantId: string,
  query: string,
  embedding: QuestionEmbedding,
  options: { language?: string; limit?: number; minSimilarity: number },
): Promise<KnowledgePassage[]> {
  if (query.trim() === '') return [];
  const limit = documentLimit(options.limit);
  const depth = limit * PASSAGES_PER_DOCUMENT;
  const lexical = await rankPassages(db, tenantId, query, { limit: depth });
  const semantic = await vectorRankPassages(db, tenantId, embedding.vector, depth, embedding.model);
  const best =
    semantic.length === 0
      ? lexicalDocuments(lexical, limit)
      : fusedDocuments(lexical, semantic, await passagesOf(db, tenantId, semantic, lexical), {
          limit,
          minSimilarity: options.minSimilarity,
        });
  return quoteDocuments(db, tenantId, query, best, options.language);
}

/**
 * Documents in the order of their passages' fused scores (weighed as documentRank weighs lexical
 * scores), each quoted at its best fused passage, ranked as the module header says.
 */
function fusedDocuments(
  lexical: RankedPassage[],
  semantic: VectorRank[],
  passages: Map<string, RankedPassage>,
  options: { limit: number; minSimilarity: number },
): RankedDocument[] {
  const fused = fuseRanks(
    lexical.map((p) => p.passage_id),
    semantic.map((v) => v.passage_id),
  );
  const similarity = new Map(semantic.map((v) => [v.passage_id, v.similarity]));
  const lexicalByDocument = byDocument(lexical);
  const inFusedOrder = [...fused.keys()].flatMap((id) => passages.get(id) ?? []);
  return [...byDocument(inFusedOrder).entries()]
    .map(([documentId, held]) => {
      const lexical = lexicalRank(lexicalByDocument.get(documentId) ?? []);
      const closest = Math.max(...held.map((p) => similarity.get(p.passage_id) ?? -1));
      return {
        passage: held[0] as RankedPassage,
        rank: Math.max(lexical, similarityRank(closest, options.minSimilarity)),
        fused: documentRank(held.map((p) => fused.get(p.passage_id) ?? 0)),
      };
    })
    .sort((a, b) => b.fused - a.fused)
    .slice(0, options.limit)
    .map(({ passage, rank }) => ({ passage, rank }));
}

/** The passages the fusion may quote: the lexical ones, and those only the vectors found, read here. */
async function passagesOf(
  db: Db,
  tenantId: string,
  semantic: VectorRank[],
  lexical: RankedPassage[],
): Promise<Map<string, RankedPassage>> {
  const known = new Map(lexical.map((p) => [p.passage_id, p]));
  const missing = semantic.map((v) => v.passage_id).filter((id) => !known.has(id));
  if (missing.length === 0) return known;
  const { rows } = await sql<Omit<RankedPassage, 'score' | 'words' | 'matched' | 'held'>>`
    select p.id::text as passage_id, p.document_id, p.translation_id, p.language, p.ordinal, p.heading, p.content,
           p.search_config::text as search_config
      from knowledge_passages p
     where p.tenant_id = ${tenantId} and p.id = any(${missing}::bigint[])
  `.execute(db);
  // Found by meaning alone: no word of the question counted.
  for (const row of rows) known.set(row.passage_id, { ...row, score: 0, words: 0, matched: 0, held: 0 });
  return known;
}
