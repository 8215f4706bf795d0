// Every time a question goes unanswered, one row: the request it counts towards, and the
// conversation and message it came from. A request keeps the first conversation only, so without
// these rows a later conversation that hit the same open request looked answered to analytics
// (its `resolved_conversations`). The requests recorded so far give their first occurrence.
import type { Migration } from '../migrate.js';

export const knowledgeGapOccurrences: Migration = {
  name: '0010-knowledge-gap-occurrences',
  statements: [
    `create table knowledge_gap_occurrences (
       id bigint generated always as identity primary key,
       tenant_id text not null references tenants(id) on delete cascade,
       request_id uuid not null references knowledge_update_requests(id) on delete cascade,
       conversation_id uuid,
       message_id uuid,
       created_at timestamptz not null default now()
     )`,
    'create index knowledge_gap_occurrences_conversation on knowledge_gap_occurrences (tenant_id, conversation_id)',
    'create index knowledge_gap_occurrences_request on knowledge_gap_occurrences (request_id)',
    `insert into knowledge_gap_occurrences (tenant_id, request_id, conversation_id, message_id, created_at)
       select tenant_id, id, conversation_id, message_id, created_at from knowledge_update_requests`,
  ],
};
