// Knowledge coverage (DESIGN.md §7): referentials of reference questions grouped by
// domain, evaluation runs with one result per question, and question-extraction runs with their
// live progress. Dashboard analytics reads the conversation tables and adds indexes for its
// date-range scans.
import type { Migration } from '../migrate.js';

export const coverageAnalytics: Migration = {
  name: '0008-coverage-analytics',
  statements: [
    `create table coverage_referentials (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, name)
     )`,
    'create index coverage_referentials_tenant on coverage_referentials (tenant_id, id desc)',
    // origin: 'manual' (added through the API) or 'extracted' (found in a conversation).
    `create table coverage_questions (
       id uuid primary key,
       tenant_id text not null,
       referential_id uuid not null references coverage_referentials(id) on delete cascade,
       question text not null,
       domain text not null,
       origin text not null default 'manual' check (origin in ('manual', 'extracted')),
       conversation_id uuid,
       message_id uuid,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index coverage_questions_list on coverage_questions (tenant_id, referential_id, id desc)',
    'create index coverage_questions_domain on coverage_questions (tenant_id, referential_id, domain)',
    `create table coverage_evaluations (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       referential_id uuid not null references coverage_referentials(id) on delete cascade,
       status text not null default 'queued' check (status in ('queued', 'running', 'completed', 'failed')),
       method text not null check (method in ('rank_threshold', 'llm_judge')),
       threshold double precision not null,
       total_questions integer not null default 0,
       processed_questions integer not null default 0,
       covered_questions integer not null default 0,
       domains jsonb not null default '[]',
       error text,
       created_at timestamptz not null default now(),
       started_at timestamptz,
       completed_at timestamptz,
       updated_at timestamptz not null default now()
     )`,
    'create index coverage_evaluations_tenant on coverage_evaluations (tenant_id, id desc)',
    `create index coverage_evaluations_completed on coverage_evaluations (tenant_id, completed_at desc)
       where status = 'completed'`,
    // One row per question of a run: a retried job resumes after the questions already judged.
    `create table coverage_results (
       evaluation_id uuid not null references coverage_evaluations(id) on delete cascade,
       tenant_id text not null,
       question_id uuid not null,
       question text not null,
       domain text not null,
       covered boolean not null,
       best_rank double precision,
       document_id uuid,
       created_at timestamptz not null default now(),
       primary key (evaluation_id, question_id)
     )`,
    `create table coverage_extractions (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       referential_id uuid not null references coverage_referentials(id) on delete cascade,
       status text not null default 'queued' check (status in ('queued', 'running', 'completed', 'failed')),
       total_conversations integer not null default 0,
       processed_conversations integer not null default 0,
       questions_found integer not null default 0,
       questions_added integer not null default 0,
       last_conversation_id uuid,
       cutoff_at timestamptz not null default now(),
       error text,
       created_at timestamptz not null default now(),
       started_at timestamptz,
       finished_at timestamptz,
       updated_at timestamptz not null default now()
     )`,
    'create index coverage_extractions_tenant on coverage_extractions (tenant_id, id desc)',
    // At most one queued-or-running extraction per tenant.
    `create unique index coverage_extractions_active on coverage_extractions (tenant_id)
       where status in ('queued', 'running')`,

    // Analytics: date-range scans per tenant.
    'create index conversations_tenant_created on conversations (tenant_id, created_at)',
    'create index messages_tenant_created on messages (tenant_id, created_at)',
    'create index message_feedback_tenant_created on message_feedback (tenant_id, created_at)',
    'create index knowledge_update_requests_created on knowledge_update_requests (tenant_id, created_at)',
    'create index tickets_conversation on tickets (tenant_id, conversation_id)',
    'create index message_feedback_conversation on message_feedback (tenant_id, conversation_id)',
    'create index knowledge_update_requests_conversation on knowledge_update_requests (tenant_id, conversation_id)',
  ],
};
