// Passage embeddings for semantic retrieval (docs/knowledge.md, "Semantic retrieval"): one vector
// per passage, computed by the configured embeddings model (EMBEDDINGS_*) and stored with that
// model's name, so vectors of another model are never compared with a question's. A passage's text
// never changes (a changed text makes new passages), so its vector stays good until the passage
// goes, and goes with it.
//
// Vectors are `real[]`, which PGlite and every PostgreSQL hold; `knowledge_cosine` computes their
// cosine similarity in plain SQL. On a server with pgvector the column could be a `vector` with an
// index of its own (see the docs).
import type { Migration } from '../migrate.js';

export const passageEmbeddings: Migration = {
  name: '0017-passage-embeddings',
  statements: [
    `create table knowledge_passage_vectors (
       passage_id bigint primary key references knowledge_passages(id) on delete cascade,
       tenant_id text not null,
       model text not null,
       embedding real[] not null,
       created_at timestamptz not null default now()
     )`,
    'create index knowledge_passage_vectors_tenant on knowledge_passage_vectors (tenant_id, model)',
    // Cosine similarity in [-1, 1]; null when the vectors differ in length or one is all zeros.
    `create function knowledge_cosine(a real[], b real[]) returns double precision
     language sql immutable parallel safe as $fn$
       select case when cardinality(a) <> cardinality(b) or sum(x * x) = 0 or sum(y * y) = 0 then null
                   else sum(x::float8 * y) / sqrt(sum(x::float8 * x) * sum(y::float8 * y)) end
         from unnest(a, b) as t(x, y)
     $fn$`,
  ],
};
