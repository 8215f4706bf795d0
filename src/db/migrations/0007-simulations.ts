// Simulations (DESIGN.md §7, docs/simulations.md): personas, datasets of test cases, runs and
// their per-case results, and the marker that keeps simulated conversations apart from real ones.
//
// A run snapshots its test cases into `simulation_results` (one row per case, unique per run and
// case) when it starts, so the job that plays it can be re-claimed after a crash and continue with
// the cases still `pending`; `attempt` is the job attempt that holds a row, a fence against a
// worker that lost its lease recording a result another worker already owns.
import type { Migration } from '../migrate.js';

export const simulations: Migration = {
  name: '0007-simulations',
  statements: [
    `create table simulation_personas (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       description text not null,
       created_at timestamptz not null default now(),
       unique (tenant_id, name)
     )`,
    'create index simulation_personas_tenant on simulation_personas (tenant_id, id desc)',
    `create table simulation_datasets (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       description text,
       agent_id uuid references agents(id) on delete set null,
       default_persona_id uuid references simulation_personas(id) on delete set null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, name)
     )`,
    'create index simulation_datasets_tenant on simulation_datasets (tenant_id, id desc)',
    `create table simulation_test_cases (
       id uuid primary key,
       tenant_id text not null,
       dataset_id uuid not null references simulation_datasets(id) on delete cascade,
       position integer not null,
       question text not null,
       expected_type text not null check (expected_type in ('answer', 'tool_call', 'handoff', 'no_answer')),
       expected_answer text,
       expected_tool_name text,
       expected_tool_args jsonb not null default '{}',
       expected_agent_id uuid,
       persona_id uuid references simulation_personas(id) on delete set null,
       metadata jsonb not null default '{}',
       api_data_overrides jsonb not null default '{}',
       tool_call_overrides jsonb not null default '{}',
       steps jsonb not null default '[]',
       created_at timestamptz not null default now()
     )`,
    'create index simulation_test_cases_dataset on simulation_test_cases (tenant_id, dataset_id, position, id)',
    `create table simulation_runs (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       dataset_id uuid not null references simulation_datasets(id) on delete cascade,
       dataset_name text not null,
       agent_id uuid not null,
       agent_name text not null,
       status text not null check (status in ('queued', 'running', 'completed', 'failed')),
       total_tests integer not null,
       passed_tests integer not null default 0,
       failed_tests integer not null default 0,
       error_message text,
       job_id uuid,
       started_at timestamptz,
       completed_at timestamptz,
       created_at timestamptz not null default now()
     )`,
    'create index simulation_runs_dataset on simulation_runs (tenant_id, dataset_id, id desc)',
    `create table simulation_results (
       id uuid primary key,
       tenant_id text not null,
       run_id uuid not null references simulation_runs(id) on delete cascade,
       test_case_id uuid not null,
       position integer not null,
       test_case jsonb not null,
       status text not null check (status in ('pending', 'running', 'passed', 'failed')),
       attempt integer,
       conversation_id uuid,
       outcome jsonb,
       reason text,
       score double precision,
       evaluation jsonb,
       started_at timestamptz,
       completed_at timestamptz,
       unique (run_id, test_case_id)
     )`,
    'create index simulation_results_run on simulation_results (run_id, status, position)',
    // A conversation played by a simulation: analytics and conversation lists leave these out.
    `create table simulation_conversations (
       conversation_id uuid primary key references conversations(id) on delete cascade,
       tenant_id text not null,
       run_id uuid not null,
       test_case_id uuid not null,
       created_at timestamptz not null default now()
     )`,
    'create index simulation_conversations_run on simulation_conversations (tenant_id, run_id)',
  ],
};
