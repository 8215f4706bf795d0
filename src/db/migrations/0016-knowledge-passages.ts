// Passages and the statistics of BM25 ranking (docs/knowledge.md, "How the agent finds answers").
//
// Every document and every translation is cut into passages: its sections under their Markdown
// headings, each section's paragraphs gathered up to about 600 characters, a paragraph longer
// than that cut at sentence ends. A passage carries its document's title and its heading path, so
// "Options" under "ls - list directory contents" is found by either. The database keeps them in
// step with the text by triggers on `documents` and `document_translations`, whatever writes them
// (the API, a crawl, a translation), so no write path can forget to.
//
// The ranking needs, per tenant and text-search configuration (language), how many passages hold
// each word (its document frequency) and the passages' average length. Statement-level triggers
// on `knowledge_passages` keep `knowledge_terms` and `knowledge_stats` exact as passages come and
// go; rows are locked in word order, so two writers of one tenant never deadlock on them.
import type { Migration } from '../migrate.js';

/** Characters a passage gathers paragraphs up to; a longer paragraph is cut at sentence ends. */
export const PASSAGE_CHARS = 600;

export const knowledgePassages: Migration = {
  name: '0016-knowledge-passages',
  statements: [
    `create table knowledge_passages (
       id bigint generated always as identity primary key,
       tenant_id text not null,
       document_id uuid not null references documents(id) on delete cascade,
       translation_id uuid references document_translations(id) on delete cascade,
       language text not null,
       ordinal integer not null,
       heading text not null,
       content text not null,
       search_config regconfig not null,
       search_vector tsvector not null,
       length integer not null
     )`,
    'create index knowledge_passages_document on knowledge_passages (document_id)',
    'create index knowledge_passages_search on knowledge_passages using gin (search_vector)',

    `create table knowledge_terms (
       tenant_id text not null references tenants(id) on delete cascade,
       search_config regconfig not null,
       term text not null,
       passages integer not null,
       primary key (tenant_id, search_config, term)
     )`,
    `create table knowledge_stats (
       tenant_id text not null references tenants(id) on delete cascade,
       search_config regconfig not null,
       passages integer not null,
       total_length bigint not null,
       primary key (tenant_id, search_config)
     )`,

    // A text's passages: (ordinal, heading path, content).
    `create function knowledge_split(p_text text, p_max integer default ${PASSAGE_CHARS})
     returns table (ordinal integer, heading text, content text)
     language plpgsql immutable as $fn$
     declare
       line text;
       path text[] := '{}';
       para text := '';
       chunk text := '';
       piece text;
       level integer;
       n integer := 0;
       lines text[] := regexp_split_to_array(coalesce(p_text, '') || E'\\n', E'\\r?\\n');
     begin
       foreach line in array lines loop
         if line ~ '^\\s*$' or line ~ '^#{1,6}\\s' then
           -- A paragraph ends: gather it into the chunk, or cut it if it is long.
           if para <> '' then
             if length(chunk) > 0 and length(chunk) + length(para) > p_max then
               n := n + 1; ordinal := n; heading := array_to_string(path, ' > '); content := chunk; return next;
               chunk := '';
             end if;
             if length(para) > p_max * 2 then
               foreach piece in array regexp_split_to_array(para, '(?<=[.!?])\\s+') loop
                 if length(chunk) > 0 and length(chunk) + length(piece) > p_max then
                   n := n + 1; ordinal := n; heading := array_to_string(path, ' > '); content := chunk; return next;
                   chunk := '';
                 end if;
                 chunk := case when chunk = '' then left(piece, p_max * 4) else chunk || ' ' || left(piece, p_max * 4) end;
               end loop;
             else
               chunk := case when chunk = '' then para else chunk || E'\\n\\n' || para end;
             end if;
             para := '';
           end if;
           if line ~ '^#{1,6}\\s' then
             if chunk <> '' then
               n := n + 1; ordinal := n; heading := array_to_string(path, ' > '); content := chunk; return next;
               chunk := '';
             end if;
             level := length(substring(line from '^#+'));
             path := coalesce(path[1:level - 1], '{}');
             path[level] := btrim(regexp_replace(line, '^#+\\s*', ''));
           end if;
         else
           para := case when para = '' then btrim(line) else para || ' ' || btrim(line) end;
         end if;
       end loop;
       if chunk <> '' then
         n := n + 1; ordinal := n; heading := array_to_string(path, ' > '); content := chunk; return next;
       end if;
     end
     $fn$`,

    // A document's or a translation's passages, made again from its text. The title weighs as
    // field A, the heading path and a translation's related questions as B, the body as D.
    `create function knowledge_index(p_tenant text, p_document uuid, p_translation uuid, p_language text,
                                     p_config regconfig, p_title text, p_extra text, p_text text)
     returns void language plpgsql as $fn$
     begin
       delete from knowledge_passages
        where document_id = p_document and translation_id is not distinct from p_translation;
       insert into knowledge_passages (tenant_id, document_id, translation_id, language, ordinal, heading,
                                       content, search_config, search_vector, length)
       select p_tenant, p_document, p_translation, p_language, s.ordinal, s.heading, s.content, p_config,
              setweight(to_tsvector(p_config, coalesce(p_title, '')), 'A') ||
              setweight(to_tsvector(p_config, s.heading || ' ' || left(coalesce(p_extra, ''), 2000)), 'B') ||
              setweight(to_tsvector(p_config, s.content), 'D'),
              greatest(length(to_tsvector(p_config, s.content)), 1)
       from knowledge_split(left(p_text, 1000000)) s;
     end
     $fn$`,

    `create function knowledge_documents_changed() returns trigger language plpgsql as $fn$
     begin
       perform knowledge_index(new.tenant_id, new.id, null, new.language, new.search_config,
                               new.title, '', new.content);
       return null;
     end
     $fn$`,
    `create trigger knowledge_documents_changed after insert or update of title, content, language, search_config
       on documents for each row execute function knowledge_documents_changed()`,
    `create function knowledge_translations_changed() returns trigger language plpgsql as $fn$
     begin
       perform knowledge_index(new.tenant_id, new.document_id, new.id, new.language, new.search_config,
                               new.title, new.related_questions, new.content);
       return null;
     end
     $fn$`,
    `create trigger knowledge_translations_changed
       after insert or update of title, content, related_questions, language, search_config
       on document_translations for each row execute function knowledge_translations_changed()`,

    // The statistics follow the passages, one statement at a time.
    `create function knowledge_passages_added() returns trigger language plpgsql as $fn$
     begin
       insert into knowledge_stats as s (tenant_id, search_config, passages, total_length)
       select tenant_id, search_config, count(*), sum(length) from added
        group by tenant_id, search_config order by tenant_id, search_config
       on conflict (tenant_id, search_config) do update
         set passages = s.passages + excluded.passages, total_length = s.total_length + excluded.total_length;
       insert into knowledge_terms as t (tenant_id, search_config, term, passages)
       select a.tenant_id, a.search_config, w.term, count(*)
         from added a, unnest(tsvector_to_array(a.search_vector)) as w(term)
        group by 1, 2, 3 order by 1, 2, 3
       on conflict (tenant_id, search_config, term) do update set passages = t.passages + excluded.passages;
       return null;
     end
     $fn$`,
    `create trigger knowledge_passages_added after insert on knowledge_passages
       referencing new table as added for each statement execute function knowledge_passages_added()`,
    `create function knowledge_passages_removed() returns trigger language plpgsql as $fn$
     begin
       perform 1 from knowledge_stats s
         join (select distinct tenant_id, search_config from removed) r using (tenant_id, search_config)
        order by s.tenant_id, s.search_config for update of s;
       update knowledge_stats s set passages = s.passages - r.n, total_length = s.total_length - r.total
         from (select tenant_id, search_config, count(*) as n, sum(length) as total from removed group by 1, 2) r
        where s.tenant_id = r.tenant_id and s.search_config = r.search_config;
       perform 1 from knowledge_terms t
         join (select distinct r.tenant_id, r.search_config, w.term
                 from removed r, unnest(tsvector_to_array(r.search_vector)) as w(term)) d
           on t.tenant_id = d.tenant_id and t.search_config = d.search_config and t.term = d.term
        order by t.tenant_id, t.search_config, t.term for update of t;
       update knowledge_terms t set passages = t.passages - d.n
         from (select r.tenant_id, r.search_config, w.term, count(*) as n
                 from removed r, unnest(tsvector_to_array(r.search_vector)) as w(term) group by 1, 2, 3) d
        where t.tenant_id = d.tenant_id and t.search_config = d.search_config and t.term = d.term;
       return null;
     end
     $fn$`,
    `create trigger knowledge_passages_removed after delete on knowledge_passages
       referencing old table as removed for each statement execute function knowledge_passages_removed()`,

    // The knowledge already written gets its passages.
    `select knowledge_index(tenant_id, id, null, language, search_config, title, '', content) from documents`,
    `select knowledge_index(tenant_id, document_id, id, language, search_config, title, related_questions, content)
       from document_translations`,
  ],
};
