// Typed tables for Kysely. Every table of tenant data carries `tenant_id` (DESIGN.md §3).
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

export interface TenantsTable {
  id: string;
  name: string;
  created_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  tenant_id: string;
  name: string;
  prefix: string;
  secret_hash: string;
  scopes: string[];
  expires_at: NullableTimestamp;
  locked_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface OperatorTokensTable {
  id: string;
  token_hash: string;
  created_at: Timestamp;
}

export interface IdempotencyKeysTable {
  tenant_id: string;
  key: string;
  request_hash: string;
  status_code: number | null;
  content_type: string | null;
  response_body: string | null;
  created_at: Timestamp;
}

export interface AppsTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  head_commit_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CommitFileChange {
  path: string;
  change: 'added' | 'modified' | 'deleted';
}

export interface AppCommitsTable {
  id: string;
  tenant_id: string;
  app_id: string;
  message: string;
  parent_id: string | null;
  files: Json<CommitFileChange[]>;
  created_at: Timestamp;
}

export interface AppFilesTable {
  tenant_id: string;
  app_id: string;
  path: string;
  content: string;
  size: number;
  commit_id: string;
  updated_at: Timestamp;
}

export interface WorkflowsTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  trigger_phrases: Json<string[]>;
  input_schema: Json<Record<string, unknown> | null>;
  enabled: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface Database {
  tenants: TenantsTable;
  api_keys: ApiKeysTable;
  operator_tokens: OperatorTokensTable;
  idempotency_keys: IdempotencyKeysTable;
  apps: AppsTable;
  app_commits: AppCommitsTable;
  app_files: AppFilesTable;
  workflows: WorkflowsTable;
}
