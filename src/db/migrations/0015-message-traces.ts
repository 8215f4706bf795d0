// The trace of each agent turn (docs/agent.md, "The trace of a turn"): what the turn searched and
// found, each provider call with its tokens and cost, each function call, the decision taken and
// the latency. One row per agent message, deleted with it (and so with its conversation). The
// token and cost columns repeat the trace's totals so the dashboard report sums them in SQL.
import type { Migration } from '../migrate.js';

export const messageTraces: Migration = {
  name: '0015-message-traces',
  statements: [
    `create table message_traces (
       message_id uuid primary key references messages(id) on delete cascade,
       tenant_id text not null references tenants(id) on delete cascade,
       conversation_id uuid not null,
       agent_id uuid,
       provider text not null,
       status text not null,
       input_tokens integer not null default 0,
       output_tokens integer not null default 0,
       cost double precision,
       latency_ms integer not null default 0,
       trace jsonb not null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index message_traces_tenant_day on message_traces (tenant_id, created_at)',
  ],
};
