// Languages and PostgreSQL text-search configurations. A passage is indexed with the
// configuration of its language (stemming, stop words); queries are parsed with the same one.
import { sql } from 'kysely';
import type { Db, HeavyQueries } from '../../db/index.js';
import { DomainError, ValidationError } from '../errors.js';

/** Primary language subtag → text-search configuration; any other language uses `simple`. */
export const SEARCH_CONFIGS: Readonly<Record<string, string>> = {
  en: 'english',
  fr: 'french',
  de: 'german',
  es: 'spanish',
  it: 'italian',
  pt: 'portuguese',
  nl: 'dutch',
};

export const DEFAULT_LANGUAGE = 'en';

/** Every configuration a passage can be indexed with. */
export const ALL_SEARCH_CONFIGS: readonly string[] = [...new Set([...Object.values(SEARCH_CONFIGS), 'simple'])];

/** Language tags are stored lower-case (`pt-br`), so "one translation per language" is exact. */
export const normalizeLanguage = (language: string): string => language.trim().toLowerCase();

export function searchConfigFor(language: string): string {
  const primary = normalizeLanguage(language).split('-')[0] ?? '';
  return SEARCH_CONFIGS[primary] ?? 'simple';
}

/** The same mapping in SQL, for re-indexing rows in place (configuration names are constants). */
export function searchConfigSql(languageColumn: string) {
  const primary = sql`split_part(lower(${sql.ref(languageColumn)}), '-', 1)`;
  const cases = Object.entries(SEARCH_CONFIGS).map(
    ([code, config]) => sql`when ${sql.lit(code)} then ${sql.lit(config)}`,
  );
  return sql<string>`(case ${primary} ${sql.join(cases, sql` `)} else 'simple' end)::regconfig`;
}

/**
 * A list's full-text query `q`, trimmed. A query of spaces only is refused: it names nothing to
 * search for, and would read as no query in one list and as matching nothing in another.
 */
export function searchQuery(q: string | undefined): string | undefined {
  if (q === undefined) return undefined;
  const trimmed = q.trim();
  if (trimmed === '') throw new ValidationError('q', 'q must hold something to search for.');
  return trimmed;
}

/** Runs a tenant's full-text search (`q`) in a transaction of its own, under the shared limits. */
export type SearchRunner = <T>(tenantId: string, work: (trx: Db) => Promise<T>) => Promise<T>;

/**
 * Searches run as heavy queries (src/db/heavy-queries.ts): one that runs past `timeoutMs` is
 * stopped and answers 422 naming `q`; one that finds no slot free within it answers 503.
 */
export function searchRunner(heavy: HeavyQueries, timeoutMs: number): SearchRunner {
  const limit = {
    timeoutMs,
    tooLong: () =>
      new ValidationError(
        'q',
        `The search took longer than ${timeoutMs} ms and was stopped: search for fewer or rarer words, or narrow it with a filter.`,
      ),
    busy: () => tooManyHeavyQueries(),
  };
  return (tenantId, work) => heavy.run(tenantId, limit, work);
}

/**
 * The agent's knowledge search failed its limits: the turn that made it ends FAILED with this
 * `code` (src/domain/agent/engine.ts). A coverage evaluation counts a timed-out question as not covered
 * and retries on busy; a simulation run puts a busy case back and is retried.
 */
export class KnowledgeSearchFailure extends Error {
  constructor(
    readonly code: 'knowledge_search_timeout' | 'knowledge_search_busy',
    message: string,
  ) {
    super(message);
    this.name = 'KnowledgeSearchFailure';
  }
}

/** The agent's knowledge search, run as a heavy query within the search limits. */
export function knowledgeSearchLimit(timeoutMs: number) {
  return {
    timeoutMs,
    tooLong: () =>
      new KnowledgeSearchFailure(
        'knowledge_search_timeout',
        `The knowledge search took longer than ${timeoutMs} ms and was stopped.`,
      ),
    busy: () =>
      new KnowledgeSearchFailure(
        'knowledge_search_busy',
        `No search slot freed within ${timeoutMs} ms (too many searches running); try again shortly.`,
      ),
  };
}

/** No slot for a search or report freed in time (503, with `Retry-After`). */
export const tooManyHeavyQueries = () =>
  new DomainError(
    'service_unavailable',
    'Too many searches and reports are running at the moment; retry after the `Retry-After` seconds.',
  );
