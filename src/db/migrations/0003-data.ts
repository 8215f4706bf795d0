// Custom data sources and smart sources (DESIGN.md §7). The metadata rows live here; each custom
// data source also owns a backing table of its rows, created and dropped at run time by
// src/domain/data/custom-data-sources.ts under a generated name (`cds_<uuid hex>`) kept in
// `table_name`. A smart source outlives its data source: the reference is set to null.
import type { Migration } from '../migrate.js';

export const customData: Migration = {
  name: '0003-data',
  statements: [
    `create table custom_data_sources (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       slug text not null,
       fields jsonb not null default '[]',
       table_name text not null unique,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       unique (tenant_id, slug)
     )`,
    'create index custom_data_sources_tenant on custom_data_sources (tenant_id, id desc)',
    `create table smart_sources (
       id uuid primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       name text not null,
       data_source_id uuid references custom_data_sources(id) on delete set null,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now()
     )`,
    'create index smart_sources_tenant on smart_sources (tenant_id, id desc)',
  ],
};
