// PostgreSQL caps what a search vector (tsvector) holds at 1 MiB of words and positions. A
// document's text may be 1,000,000 characters, and a page of that many distinct words overflowed
// it: the insert failed, a crawl holding such a page failed on every attempt. The vectors now
// index a bounded prefix of each long text, which no text can overflow: the first 100,000
// characters of the body (at most about 600 KB of words and positions, in 4-byte characters) and
// 50,000 of a translation's related questions. The text itself is kept whole.
import type { Migration } from '../migrate.js';

const vector = (extra: string) =>
  `tsvector generated always as (
     setweight(to_tsvector(search_config, coalesce(title, '')), 'A') ||
     ${extra}
     setweight(to_tsvector(search_config, left(coalesce(content, ''), 100000)), 'C')
   ) stored`;

export const boundedSearchVectors: Migration = {
  name: '0011-bounded-search-vectors',
  statements: [
    'alter table documents drop column search_vector',
    `alter table documents add column search_vector ${vector('')}`,
    'create index documents_search on documents using gin (search_vector)',
    'alter table document_translations drop column search_vector',
    `alter table document_translations add column search_vector ${vector(
      `setweight(to_tsvector(search_config, left(coalesce(related_questions, ''), 50000)), 'B') ||`,
    )}`,
    'create index document_translations_search on document_translations using gin (search_vector)',
  ],
};
