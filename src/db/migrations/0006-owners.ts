// Workspace owners: the people who sign in to the admin settings page
// (/admin/settings/integrations/api) to manage their tenant's API keys. Passwords are stored as
// scrypt hashes; sessions as the SHA-256 of a random token that only the browser's cookie holds.
import type { Migration } from '../migrate.js';

export const owners: Migration = {
  name: '0006-owners',
  statements: [
    `create table owners (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       email text not null,
       email_key text generated always as (lower(email)) stored,
       password_hash text not null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, email_key)
     )`,
    `create table owner_sessions (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       owner_id uuid not null references owners(id) on delete cascade,
       token_hash text not null unique,
       expires_at timestamptz not null,
       created_at timestamptz not null default now()
     )`,
    'create index owner_sessions_expires on owner_sessions (expires_at)',
  ],
};
