// Tasks and accounts: staff users with their permissions and notifications, tasks with
// a per-tenant gap-free `TASK-<n>` counter, comments with mentions, and idempotent task links.
// Link targets live in the conversations (0004) and knowledge (0002) tables; links keep a plain
// uuid to them (a target of any of five kinds cannot be one foreign key).
import type { Migration } from '../migrate.js';

export const tasksAccounts: Migration = {
  name: '0005-tasks-accounts',
  statements: [
    // email_key makes the e-mail match case-insensitive and is the upsert's conflict target.
    // The role check repeats the domain rule in the database: no row can ever say "admin"
    // (spec: Authentication 7, "The API can never grant Admin status to a user").
    `create table users (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       email text not null,
       email_key text generated always as (lower(email)) stored,
       name text not null,
       role text not null check (role in ('agent', 'supervisor', 'viewer')),
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, email_key)
     )`,
    'create index users_tenant on users (tenant_id, id desc)',
    `create table user_permissions (
       id uuid primary key,
       tenant_id text not null,
       user_id uuid not null references users(id) on delete cascade,
       name text not null check (name ~ '^[a-z]+\\.[a-z_]+$' and position('admin' in name) = 0),
       created_at timestamptz not null default now(),
       unique (user_id, name)
     )`,
    'create index user_permissions_tenant on user_permissions (tenant_id, user_id)',

    // One row per tenant holding the last number given; incremented inside the task insert's
    // transaction, so numbers are gap-free (a failed insert rolls the increment back) and
    // race-free (concurrent creations queue on the row lock).
    `create table task_counters (
       tenant_id text primary key references tenants(id) on delete cascade,
       last_number integer not null
     )`,
    `create table tasks (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       number integer not null check (number > 0),
       title text not null,
       description text,
       assignee_id uuid references users(id) on delete set null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, number)
     )`,
    'create index tasks_tenant on tasks (tenant_id, id desc)',

    // The author is a staff user, or else the API key that called (its name kept as it was then).
    `create table task_comments (
       id uuid primary key,
       tenant_id text not null,
       task_id uuid not null references tasks(id) on delete cascade,
       content text not null,
       author_user_id uuid references users(id),
       author_key_id uuid,
       author_key_name text,
       created_at timestamptz not null default now(),
       edited_at timestamptz,
       check (author_user_id is not null or author_key_id is not null)
     )`,
    'create index task_comments_task on task_comments (tenant_id, task_id, id desc)',
    `create table task_comment_mentions (
       tenant_id text not null,
       comment_id uuid not null references task_comments(id) on delete cascade,
       user_id uuid not null references users(id) on delete cascade,
       position integer not null,
       primary key (comment_id, user_id)
     )`,

    `create table notifications (
       id uuid primary key,
       tenant_id text not null,
       user_id uuid not null references users(id) on delete cascade,
       type text not null,
       task_id uuid references tasks(id) on delete cascade,
       comment_id uuid references task_comments(id) on delete cascade,
       message text not null,
       created_at timestamptz not null default now()
     )`,
    'create index notifications_user on notifications (tenant_id, user_id, id desc)',

    // One link per task and target, whatever happens: the unique constraint is what makes
    // "linking twice is a no-op" hold under concurrent requests (spec: behaviour rule 4).
    `create table task_links (
       id uuid primary key,
       tenant_id text not null,
       task_id uuid not null references tasks(id) on delete cascade,
       target_type text not null
         check (target_type in ('conversation', 'ticket', 'feedback', 'message', 'knowledge_update_request')),
       target_id uuid not null,
       conversation_id uuid,
       message_id uuid,
       deleted_at timestamptz,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (task_id, target_type, target_id)
     )`,
    'create index task_links_task on task_links (tenant_id, task_id, id desc)',
  ],
};
