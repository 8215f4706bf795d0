// The passages a turn answers from: the knowledge search's best, kept at or above the rank threshold.
import type { EngineContext, Runtime } from './turn-runtime.js';
import { lastInput } from './turn-runtime.js';
import type { Passage } from './types.js';

/** Passages ranked below this are not used to answer (built-in rule 4 then applies). */
export const MIN_ANSWER_RANK = 0.1;
/** How many passages a turn retrieves. */
export const PASSAGE_LIMIT = 5;

export interface Retrieval {
  object: 'retrieval';
  question: string;
  language: string | null;
  threshold: number;
  /** Passages at or above the threshold, best first. */
  passages: Passage[];
  answerable: boolean;
}

/** What a turn asking `question` would answer from, without running one. */
export async function retrieve(
  ctx: EngineContext,
  tenantId: string,
  question: string,
  options: { language?: string | null | undefined; limit?: number } = {},
): Promise<Retrieval> {
  const language = options.language ?? null;
  const passages = relevant(ctx, await search(ctx, tenantId, question, language, options.limit));
  return {
    object: 'retrieval',
    question,
    language,
    threshold: ctx.minRank,
    passages,
    answerable: passages.length > 0,
  };
}

/** The passages of a turn's first step, found for its input and recorded in its trace. */
export async function findPassages(ctx: EngineContext, rt: Runtime): Promise<void> {
  const [question, language] = [lastInput(rt), rt.state.language];
  const found = await rt.trace.search(question, language, ctx.minRank, () =>
    search(ctx, rt.tenantId, question, language),
  );
  rt.state.passages = relevant(ctx, found);
}

/**
 * Every passage the knowledge search found, best first in the search's own order: by rank when
 * lexical, by fused order when embeddings are configured (a passage's rank then only says whether
 * it answers, docs/knowledge.md "Semantic retrieval").
 */
async function search(
  ctx: EngineContext,
  tenantId: string,
  question: string,
  language: string | null,
  limit = PASSAGE_LIMIT,
) {
  return ctx.deps.searchKnowledge(tenantId, question, { ...(language ? { language } : {}), limit });
}

const relevant = (ctx: EngineContext, found: Passage[]) => found.filter((p) => p.rank >= ctx.minRank);
