// Knowledge: the durable job queue, sources, documents with their translations and
// full-text search vectors, and knowledge update requests (knowledge gaps).
import type { Migration } from '../migrate.js';

// The search vector of a passage: title weighs most (A), then related questions (B), then body (C).
// `search_config` is a regconfig column, so `to_tsvector(search_config, …)` is immutable and can
// be a stored generated column: the vector can never drift from the text it indexes.
const vector = (extra: string) =>
  `tsvector generated always as (
     setweight(to_tsvector(search_config, coalesce(title, '')), 'A') ||
     ${extra}
     setweight(to_tsvector(search_config, coalesce(content, '')), 'C')
   ) stored`;

export const knowledge: Migration = {
  name: '0002-knowledge',
  statements: [
    `create table jobs (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       kind text not null,
       payload jsonb not null default '{}',
       status text not null default 'queued' check (status in ('queued', 'running', 'succeeded', 'failed')),
       dedupe_key text,
       attempts integer not null default 0,
       max_attempts integer not null default 5 check (max_attempts >= 1),
       run_at timestamptz not null default now(),
       locked_until timestamptz,
       lock_token uuid,
       last_error text,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       finished_at timestamptz
     )`,
    // At most one queued-or-running job per dedupe key and tenant.
    `create unique index jobs_dedupe on jobs (tenant_id, dedupe_key)
       where dedupe_key is not null and status in ('queued', 'running')`,
    `create index jobs_due on jobs (run_at) where status = 'queued'`,
    `create index jobs_lease on jobs (locked_until) where status = 'running'`,
    `create index jobs_finished on jobs (finished_at) where status in ('succeeded', 'failed')`,

    `create table sources (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       source_type text not null check (source_type in ('website', 'manual')),
       external_id text,
       domain text,
       additional_info jsonb not null default '{}',
       auto_sync_enabled boolean not null default false,
       sync_status text not null default 'never_synced',
       sync_error text,
       last_synced_at timestamptz,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index sources_tenant on sources (tenant_id, id desc)',
    'create index sources_auto_sync on sources (last_synced_at) where auto_sync_enabled',

    `create table documents (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       source_id uuid references sources(id) on delete cascade,
       page_id text,
       url text,
       title text not null,
       content text not null,
       language text not null,
       search_config regconfig not null,
       content_hash text not null,
       search_vector ${vector('')},
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index documents_tenant on documents (tenant_id, id desc)',
    'create index documents_source on documents (tenant_id, source_id, id desc)',
    `create unique index documents_page on documents (source_id, page_id)
       where source_id is not null and page_id is not null`,
    'create index documents_search on documents using gin (search_vector)',

    `create table document_translations (
       id uuid primary key,
       tenant_id text not null,
       document_id uuid not null references documents(id) on delete cascade,
       language text not null,
       title text not null,
       content text not null,
       related_questions text not null default '',
       search_config regconfig not null,
       search_vector ${vector(`setweight(to_tsvector(search_config, coalesce(related_questions, '')), 'B') ||`)},
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (document_id, language)
     )`,
    'create index document_translations_tenant on document_translations (tenant_id, document_id)',
    'create index document_translations_search on document_translations using gin (search_vector)',

    // conversation_id and message_id are plain uuids: the conversations tables belong to another area.
    `create table knowledge_update_requests (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       question text not null,
       status text not null default 'open' check (status in ('open', 'approved', 'rejected', 'applied', 'resolved')),
       occurrences integer not null default 1,
       conversation_id uuid,
       message_id uuid,
       proposed_answer text,
       review_note text,
       document_id uuid references documents(id) on delete set null,
       reviewed_at timestamptz,
       applied_at timestamptz,
       resolved_at timestamptz,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index knowledge_update_requests_tenant on knowledge_update_requests (tenant_id, status, id desc)',
    'create index knowledge_update_requests_list on knowledge_update_requests (tenant_id, id desc)',
  ],
};
