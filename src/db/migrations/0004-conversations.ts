// Agents, conversations and the agent's turns (DESIGN.md §7, §8): agents, conversations, messages,
// the stored state of a turn (so a paused turn survives a restart), the function calls a turn
// made with their results, workflow runs, handoff tickets and message feedback.
import type { Migration } from '../migrate.js';

export const conversations: Migration = {
  name: '0004-conversations',
  statements: [
    `create table agents (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       instructions text,
       handoff_agent_ids jsonb not null default '[]',
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, name)
     )`,
    'create index agents_tenant on agents (tenant_id, id desc)',
    // active_turn_id / active_turn_expires_at: the claim a running turn holds on the conversation
    // (one turn at a time), with a lease so a turn whose process died does not block it forever.
    `create table conversations (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       agent_id uuid not null references agents(id),
       language text,
       context jsonb,
       message_count integer not null default 0,
       active_turn_id uuid,
       active_turn_expires_at timestamptz,
       last_message_at timestamptz,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index conversations_tenant on conversations (tenant_id, id desc)',
    `create table messages (
       id uuid primary key,
       tenant_id text not null,
       conversation_id uuid not null references conversations(id) on delete cascade,
       agent_id uuid,
       role text not null check (role in ('user', 'assistant', 'system')),
       author text not null check (author in ('customer', 'application', 'agent')),
       hidden boolean not null default false,
       content text not null default '',
       status text not null,
       citations jsonb not null default '[]',
       handoff jsonb,
       error jsonb,
       in_reply_to uuid,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index messages_conversation on messages (tenant_id, conversation_id, id)',
    `create index messages_waiting on messages (conversation_id) where status = 'WAITING_CLIENT'`,
    `create table agent_turns (
       message_id uuid primary key references messages(id) on delete cascade,
       tenant_id text not null,
       conversation_id uuid not null,
       mode text not null check (mode in ('pause', 'wait')),
       client_functions jsonb not null default '[]',
       context jsonb,
       state jsonb not null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    `create table function_calls (
       tenant_id text not null,
       message_id uuid not null references messages(id) on delete cascade,
       call_id text not null,
       position integer not null,
       name text not null,
       type text not null check (type in ('client', 'workflow')),
       arguments jsonb not null,
       status text not null check (status in ('pending', 'completed', 'failed')),
       output jsonb,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       primary key (message_id, call_id)
     )`,
    `create table workflow_runs (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       workflow_id uuid not null,
       workflow_name text not null,
       conversation_id uuid,
       message_id uuid,
       call_id text,
       arguments jsonb not null,
       status text not null check (status in ('completed', 'failed')),
       output jsonb,
       overridden boolean not null default false,
       created_at timestamptz not null default now()
     )`,
    'create index workflow_runs_tenant on workflow_runs (tenant_id, workflow_id, id desc)',
    `create table tickets (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       conversation_id uuid not null references conversations(id) on delete cascade,
       message_id uuid,
       from_agent_id uuid,
       to_agent_id uuid not null,
       reason text not null,
       status text not null default 'open',
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index tickets_tenant on tickets (tenant_id, id desc)',
    `create table message_feedback (
       id uuid primary key,
       tenant_id text not null,
       conversation_id uuid not null references conversations(id) on delete cascade,
       message_id uuid not null references messages(id) on delete cascade,
       rating text not null check (rating in ('positive', 'negative')),
       comment text,
       created_at timestamptz not null default now()
     )`,
    'create index message_feedback_message on message_feedback (tenant_id, message_id)',
  ],
};
