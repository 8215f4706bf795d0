// Foundation: tenants, API keys, operator tokens, idempotency records, apps and workflows.
import type { Migration } from '../migrate.js';

export const foundation: Migration = {
  name: '0001-foundation',
  statements: [
    `create table tenants (
       id text primary key,
       name text not null,
       created_at timestamptz not null default now()
     )`,
    `create table api_keys (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       prefix text not null,
       secret_hash text not null unique,
       scopes text[] not null,
       expires_at timestamptz,
       locked_at timestamptz,
       revoked_at timestamptz,
       last_used_at timestamptz,
       created_at timestamptz not null default now()
     )`,
    'create index api_keys_tenant on api_keys (tenant_id, id desc)',
    `create table operator_tokens (
       id uuid primary key,
       token_hash text not null unique,
       created_at timestamptz not null default now()
     )`,
    `create table idempotency_keys (
       tenant_id text not null references tenants(id) on delete cascade,
       key text not null,
       request_hash text not null,
       status_code integer,
       content_type text,
       response_body text,
       created_at timestamptz not null default now(),
       primary key (tenant_id, key)
     )`,
    'create index idempotency_keys_created on idempotency_keys (created_at)',
    `create table apps (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       description text,
       head_commit_id uuid,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, name)
     )`,
    `create table app_commits (
       id uuid primary key,
       tenant_id text not null,
       app_id uuid not null references apps(id) on delete cascade,
       message text not null,
       parent_id uuid,
       files jsonb not null,
       created_at timestamptz not null default now()
     )`,
    'create index app_commits_app on app_commits (tenant_id, app_id, id desc)',
    `create table app_files (
       tenant_id text not null,
       app_id uuid not null references apps(id) on delete cascade,
       path text not null,
       content text not null,
       size integer not null,
       commit_id uuid not null,
       updated_at timestamptz not null default now(),
       primary key (app_id, path)
     )`,
    `create table workflows (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       description text,
       trigger_phrases jsonb not null default '[]',
       input_schema jsonb,
       enabled boolean not null default false,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, name)
     )`,
    'create index workflows_tenant on workflows (tenant_id, id desc)',
  ],
};
