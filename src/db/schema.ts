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
  /** The running request holding the key (its lease), null once answered. */
  lease_token: string | null;
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

/** A declared field of a custom data source: row `data` is checked against these. */
export interface DataFieldDeclaration {
  name: string;
  type: 'string' | 'number' | 'boolean' | 'date' | 'json';
  required?: boolean;
  description?: string;
}

export interface CustomDataSourcesTable {
  id: string;
  tenant_id: string;
  name: string;
  slug: string;
  fields: Json<DataFieldDeclaration[]>;
  /** Generated (`cds_<uuid hex>`), never user input; used only through `sql.table`. */
  table_name: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SmartSourcesTable {
  id: string;
  tenant_id: string;
  name: string;
  data_source_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

// Agents, conversations and turns (src/db/migrations/0004-conversations.ts).
export interface AgentsTable {
  id: string;
  tenant_id: string;
  name: string;
  instructions: string | null;
  handoff_agent_ids: Json<string[]>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ConversationsTable {
  id: string;
  tenant_id: string;
  agent_id: string;
  language: string | null;
  context: Json<Record<string, unknown> | null>;
  message_count: Generated<number>;
  active_turn_id: string | null;
  active_turn_expires_at: NullableTimestamp;
  last_message_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MessagesTable {
  id: string;
  tenant_id: string;
  conversation_id: string;
  agent_id: string | null;
  role: 'user' | 'assistant' | 'system';
  author: 'customer' | 'application' | 'agent';
  hidden: Generated<boolean>;
  content: Generated<string>;
  status: string;
  citations: Json<unknown[]>;
  handoff: Json<{ agent_id: string; agent_name: string; ticket_id: string } | null>;
  error: Json<{ code: string; message: string } | null>;
  in_reply_to: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface AgentTurnsTable {
  message_id: string;
  tenant_id: string;
  conversation_id: string;
  mode: 'pause' | 'wait';
  client_functions: Json<unknown[]>;
  context: Json<Record<string, unknown> | null>;
  state: Json<unknown>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface FunctionCallsTable {
  tenant_id: string;
  message_id: string;
  call_id: string;
  position: number;
  name: string;
  type: 'client' | 'workflow';
  arguments: Json<Record<string, unknown>>;
  status: 'pending' | 'completed' | 'failed';
  output: Json<unknown>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface WorkflowRunsTable {
  id: string;
  tenant_id: string;
  workflow_id: string;
  workflow_name: string;
  conversation_id: string | null;
  message_id: string | null;
  call_id: string | null;
  arguments: Json<Record<string, unknown>>;
  status: 'completed' | 'failed';
  output: Json<unknown>;
  overridden: Generated<boolean>;
  created_at: Timestamp;
}

export interface TicketsTable {
  id: string;
  tenant_id: string;
  conversation_id: string;
  message_id: string | null;
  from_agent_id: string | null;
  to_agent_id: string;
  reason: string;
  status: Generated<string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MessageFeedbackTable {
  id: string;
  tenant_id: string;
  conversation_id: string;
  message_id: string;
  rating: 'positive' | 'negative';
  comment: string | null;
  created_at: Timestamp;
}

// The trace of each agent turn (src/db/migrations/0015-message-traces.ts).
export interface MessageTracesTable {
  message_id: string;
  tenant_id: string;
  conversation_id: string;
  agent_id: string | null;
  provider: string;
  status: string;
  input_tokens: number;
  output_tokens: number;
  cost: number | null;
  latency_ms: number;
  trace: Json<Record<string, unknown>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

// Knowledge: jobs, sources, documents, translations, knowledge update requests.
export type JobStatus = 'queued' | 'running' | 'succeeded' | 'failed';

export interface JobsTable {
  id: string;
  tenant_id: string;
  kind: string;
  payload: Json<Record<string, unknown>>;
  status: ColumnType<JobStatus, JobStatus | undefined, JobStatus>;
  dedupe_key: string | null;
  attempts: Generated<number>;
  max_attempts: number;
  run_at: Timestamp;
  locked_until: NullableTimestamp;
  lock_token: string | null;
  last_error: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: NullableTimestamp;
  /** Run once more when this run ends (src/jobs/queue.ts, `followUp`). */
  follow_up: Generated<boolean>;
}

export interface SourcesTable {
  id: string;
  tenant_id: string;
  name: string;
  source_type: 'website' | 'manual';
  external_id: string | null;
  domain: string | null;
  additional_info: Json<Record<string, unknown>>;
  auto_sync_enabled: Generated<boolean>;
  sync_status: ColumnType<string, string | undefined, string>;
  sync_error: string | null;
  last_synced_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface DocumentsTable {
  id: string;
  tenant_id: string;
  source_id: string | null;
  page_id: string | null;
  url: string | null;
  title: string;
  content: string;
  language: string;
  search_config: string;
  content_hash: string;
  search_vector: ColumnType<string, never, never>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface DocumentTranslationsTable {
  id: string;
  tenant_id: string;
  document_id: string;
  language: string;
  title: string;
  content: string;
  related_questions: string;
  search_config: string;
  search_vector: ColumnType<string, never, never>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type KnowledgeUpdateRequestStatus = 'open' | 'approved' | 'rejected' | 'applied' | 'resolved';

export interface KnowledgeUpdateRequestsTable {
  id: string;
  tenant_id: string;
  question: string;
  status: ColumnType<KnowledgeUpdateRequestStatus, KnowledgeUpdateRequestStatus | undefined>;
  occurrences: Generated<number>;
  conversation_id: string | null;
  message_id: string | null;
  proposed_answer: string | null;
  review_note: string | null;
  document_id: string | null;
  reviewed_at: NullableTimestamp;
  applied_at: NullableTimestamp;
  resolved_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** One unanswered asking of a request's question (src/db/migrations/0010-knowledge-gap-occurrences.ts). */
export interface KnowledgeGapOccurrencesTable {
  id: Generated<string>;
  tenant_id: string;
  request_id: string;
  conversation_id: string | null;
  message_id: string | null;
  created_at: Timestamp;
}

// Tasks and accounts (src/db/migrations/0005-tasks-accounts.ts).
export interface UsersTable {
  id: string;
  tenant_id: string;
  email: string;
  email_key: ColumnType<string, never, never>;
  name: string;
  role: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface UserPermissionsTable {
  id: string;
  tenant_id: string;
  user_id: string;
  name: string;
  created_at: Timestamp;
}

export interface TaskCountersTable {
  tenant_id: string;
  last_number: number;
}

export interface TasksTable {
  id: string;
  tenant_id: string;
  number: number;
  title: string;
  description: string | null;
  assignee_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface TaskCommentsTable {
  id: string;
  tenant_id: string;
  task_id: string;
  content: string;
  author_user_id: string | null;
  author_key_id: string | null;
  author_key_name: string | null;
  created_at: Timestamp;
  edited_at: NullableTimestamp;
}

export interface TaskCommentMentionsTable {
  tenant_id: string;
  comment_id: string;
  user_id: string;
  position: number;
}

export interface NotificationsTable {
  id: string;
  tenant_id: string;
  user_id: string;
  type: string;
  task_id: string | null;
  comment_id: string | null;
  message: string;
  created_at: Timestamp;
}

export interface TaskLinksTable {
  id: string;
  tenant_id: string;
  task_id: string;
  target_type: string;
  target_id: string;
  conversation_id: string | null;
  message_id: string | null;
  deleted_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface OwnersTable {
  id: string;
  tenant_id: string;
  email: string;
  email_key: Generated<string>;
  password_hash: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface OwnerSessionsTable {
  id: string;
  tenant_id: string;
  owner_id: string;
  token_hash: string;
  expires_at: Timestamp;
  created_at: Timestamp;
}

export interface WebhookEndpointsTable {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  events: string[];
  enabled: ColumnType<boolean, boolean | undefined, boolean>;
  disabled_reason: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: NullableTimestamp;
  failing_since: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface WebhookEventsTable {
  id: string;
  tenant_id: string;
  type: string;
  payload: string;
  created_at: Timestamp;
}

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface WebhookDeliveriesTable {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: ColumnType<WebhookDeliveryStatus, WebhookDeliveryStatus | undefined, WebhookDeliveryStatus>;
  attempts: Generated<number>;
  schedule_seq: Generated<number>;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: NullableTimestamp;
  next_retry_at: NullableTimestamp;
  retry_until: Timestamp;
  delivered_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

// Coverage (src/db/migrations/0008-coverage-analytics.ts).
export interface CoverageReferentialsTable {
  id: string;
  tenant_id: string;
  name: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CoverageQuestionsTable {
  id: string;
  tenant_id: string;
  referential_id: string;
  question: string;
  domain: string;
  origin: ColumnType<'manual' | 'extracted', 'manual' | 'extracted' | undefined, 'manual' | 'extracted'>;
  conversation_id: string | null;
  message_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type CoverageRunStatus = 'queued' | 'running' | 'completed' | 'failed';

export interface CoverageDomainResult {
  domain: string;
  covered: number;
  total: number;
  percentage: number | null;
}

export interface CoverageEvaluationsTable {
  id: string;
  tenant_id: string;
  referential_id: string;
  status: ColumnType<CoverageRunStatus, CoverageRunStatus | undefined, CoverageRunStatus>;
  method: 'rank_threshold' | 'llm_judge';
  threshold: number;
  total_questions: Generated<number>;
  processed_questions: Generated<number>;
  covered_questions: Generated<number>;
  domains: ColumnType<CoverageDomainResult[], string | undefined, string>;
  error: string | null;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  completed_at: NullableTimestamp;
  updated_at: Timestamp;
}

export interface CoverageResultsTable {
  evaluation_id: string;
  tenant_id: string;
  question_id: string;
  question: string;
  domain: string;
  covered: boolean;
  best_rank: number | null;
  document_id: string | null;
  created_at: Timestamp;
}

export interface CoverageExtractionsTable {
  id: string;
  tenant_id: string;
  referential_id: string;
  status: ColumnType<CoverageRunStatus, CoverageRunStatus | undefined, CoverageRunStatus>;
  total_conversations: Generated<number>;
  processed_conversations: Generated<number>;
  questions_found: Generated<number>;
  questions_added: Generated<number>;
  last_conversation_id: string | null;
  cutoff_at: Timestamp;
  error: string | null;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
  updated_at: Timestamp;
}

// Simulations (src/db/migrations/0007-simulations.ts).
export type SimulationExpectedType = 'answer' | 'tool_call' | 'handoff' | 'no_answer';
export type SimulationRunStatus = 'queued' | 'running' | 'completed' | 'failed';
export type SimulationResultStatus = 'pending' | 'running' | 'passed' | 'failed';

export interface SimulationPersonasTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string;
  created_at: Timestamp;
}

export interface SimulationDatasetsTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  agent_id: string | null;
  default_persona_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SimulationTestCasesTable {
  id: string;
  tenant_id: string;
  dataset_id: string;
  position: number;
  question: string;
  expected_type: SimulationExpectedType;
  expected_answer: string | null;
  expected_tool_name: string | null;
  expected_tool_args: Json<Record<string, unknown>>;
  expected_agent_id: string | null;
  persona_id: string | null;
  metadata: Json<Record<string, unknown>>;
  api_data_overrides: Json<Record<string, unknown>>;
  tool_call_overrides: Json<Record<string, unknown>>;
  steps: Json<{ content: string }[]>;
  created_at: Timestamp;
}

export interface SimulationRunsTable {
  id: string;
  tenant_id: string;
  dataset_id: string;
  dataset_name: string;
  agent_id: string;
  agent_name: string;
  status: SimulationRunStatus;
  total_tests: number;
  passed_tests: Generated<number>;
  failed_tests: Generated<number>;
  error_message: string | null;
  job_id: string | null;
  started_at: NullableTimestamp;
  completed_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface SimulationResultsTable {
  id: string;
  tenant_id: string;
  run_id: string;
  test_case_id: string;
  position: number;
  test_case: Json<Record<string, unknown>>;
  status: SimulationResultStatus;
  attempt: number | null;
  conversation_id: string | null;
  outcome: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  reason: string | null;
  score: number | null;
  evaluation: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  started_at: NullableTimestamp;
  completed_at: NullableTimestamp;
}

export interface SimulationConversationsTable {
  conversation_id: string;
  tenant_id: string;
  run_id: string;
  test_case_id: string;
  created_at: Timestamp;
}

export interface Database {
  owners: OwnersTable;
  owner_sessions: OwnerSessionsTable;
  tenants: TenantsTable;
  api_keys: ApiKeysTable;
  operator_tokens: OperatorTokensTable;
  idempotency_keys: IdempotencyKeysTable;
  apps: AppsTable;
  app_commits: AppCommitsTable;
  app_files: AppFilesTable;
  workflows: WorkflowsTable;
  jobs: JobsTable;
  sources: SourcesTable;
  documents: DocumentsTable;
  document_translations: DocumentTranslationsTable;
  knowledge_update_requests: KnowledgeUpdateRequestsTable;
  knowledge_gap_occurrences: KnowledgeGapOccurrencesTable;
  custom_data_sources: CustomDataSourcesTable;
  smart_sources: SmartSourcesTable;
  agents: AgentsTable;
  conversations: ConversationsTable;
  messages: MessagesTable;
  agent_turns: AgentTurnsTable;
  function_calls: FunctionCallsTable;
  workflow_runs: WorkflowRunsTable;
  tickets: TicketsTable;
  message_feedback: MessageFeedbackTable;
  message_traces: MessageTracesTable;
  users: UsersTable;
  user_permissions: UserPermissionsTable;
  task_counters: TaskCountersTable;
  tasks: TasksTable;
  task_comments: TaskCommentsTable;
  task_comment_mentions: TaskCommentMentionsTable;
  notifications: NotificationsTable;
  task_links: TaskLinksTable;
  coverage_referentials: CoverageReferentialsTable;
  coverage_questions: CoverageQuestionsTable;
  coverage_evaluations: CoverageEvaluationsTable;
  coverage_results: CoverageResultsTable;
  coverage_extractions: CoverageExtractionsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  simulation_personas: SimulationPersonasTable;
  simulation_datasets: SimulationDatasetsTable;
  simulation_test_cases: SimulationTestCasesTable;
  simulation_runs: SimulationRunsTable;
  simulation_results: SimulationResultsTable;
  simulation_conversations: SimulationConversationsTable;
}
