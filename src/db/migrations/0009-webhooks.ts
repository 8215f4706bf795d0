// Webhooks: endpoints a tenant registers, the events recorded for them, and one
// delivery per event and endpoint, whose attempts run on the job queue (src/jobs/queue.ts).
//
// The signing secret is stored as is: it must be recoverable to sign (HMAC), unlike an API key,
// so a hash will not do (docs/webhooks.md says so plainly). The previous secret is kept beside it
// for 24 hours after a rotation. `schedule_seq` names the one job allowed to attempt a delivery:
// a replay or a retry bumps it, so an older job still queued for it finds itself stale and stops.
import type { Migration } from '../migrate.js';

export const webhooks: Migration = {
  name: '0009-webhooks',
  statements: [
    `create table webhook_endpoints (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       url text not null,
       description text,
       events text[] not null,
       enabled boolean not null default true,
       disabled_reason text,
       secret text not null,
       previous_secret text,
       previous_secret_expires_at timestamptz,
       failing_since timestamptz,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index webhook_endpoints_tenant on webhook_endpoints (tenant_id, id desc)',
    // `payload` is the exact body sent, serialised once, so every attempt signs the same bytes.
    `create table webhook_events (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       type text not null,
       payload text not null,
       created_at timestamptz not null default now()
     )`,
    'create index webhook_events_tenant on webhook_events (tenant_id, id desc)',
    `create table webhook_deliveries (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       endpoint_id uuid not null references webhook_endpoints(id) on delete cascade,
       event_id uuid not null references webhook_events(id) on delete cascade,
       event_type text not null,
       status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
       attempts integer not null default 0,
       schedule_seq integer not null default 0,
       last_status_code integer,
       last_error text,
       last_attempt_at timestamptz,
       next_retry_at timestamptz,
       retry_until timestamptz not null,
       delivered_at timestamptz,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (endpoint_id, event_id)
     )`,
    'create index webhook_deliveries_endpoint on webhook_deliveries (tenant_id, endpoint_id, id desc)',
  ],
};
