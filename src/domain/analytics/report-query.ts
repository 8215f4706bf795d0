// The dashboard report's statement: one row per day of the range, with the overall median
// first-response time on each, computed in SQL from the conversation tables. The report's
// filters apply to conversations, and to other tables' rows through their conversation.
import { type RawBuilder, sql } from 'kysely';
import { isCustomerConversation } from '../conversations/conversations.js';
import { DAY_MS } from './report-range.js';

/** The report's filters (the dashboard's and the usage report's): on conversations, and on other rows through theirs. */
export interface ReportFilters {
  user_type?: string | undefined;
  agent_name?: string | undefined;
  organization?: string | undefined;
}

export type SeriesRow = {
  date: string;
  conversations: number;
  customer_messages: number;
  resolved: number;
  handoffs: number;
  feedback_positive: number;
  feedback_negative: number;
  gaps: number;
  median_seconds: number | null;
  overall_median_seconds: number | null;
};

/** The SQL pieces the statement's parts share: the tenant, the filters and the time bounds. */
type Scope = {
  tenantId: string;
  from: Date;
  to: Date;
  /** Joins the agent a conversation `c` is with, when the report is of one agent. */
  agentJoin: RawBuilder<unknown>;
  /** The context filters on a conversation `c`. */
  byContext: RawBuilder<unknown>;
  /** Rows of other tables count only when their conversation passes the filters. */
  inFiltered: (column: string) => RawBuilder<unknown>;
  /** A conversation a simulation case is playing (deleted when the case ends) is not a customer's. */
  customersOnly: (column: string, nullable?: boolean) => RawBuilder<unknown>;
};

/** The report's one statement: a row per day of the range, and the overall median on each. */
export function reportQuery(
  tenantId: string,
  filters: ReportFilters,
  start: string,
  end: string,
): RawBuilder<SeriesRow> {
  const scope = scopeOf(tenantId, filters, start, end);
  return sql<SeriesRow>`
    -- Plans must not depend on table statistics (PGlite never analyses): no joins between
    -- derived relations, only base tables (indexed) and hashed sub-plans.
    with ${conversationDays(scope)},
    ${activityDays(scope)},
    response_days as (
      select day, percentile_cont(0.5) within group (order by seconds) as median_seconds
      from first_response group by day
    ),
    days as (
      select d::date as day from generate_series(${start}::date, ${end}::date, interval '1 day') as d
    )
    select days.day::text as date,
      coalesce(cd.conversations, 0) as conversations,
      coalesce(md.customer_messages, 0) as customer_messages,
      coalesce(cd.resolved, 0) as resolved,
      coalesce(cd.handoffs, 0) as handoffs,
      coalesce(fd.positive, 0) as feedback_positive,
      coalesce(fd.negative, 0) as feedback_negative,
      coalesce(gd.gaps, 0) as gaps,
      rd.median_seconds::float8 as median_seconds,
      (select percentile_cont(0.5) within group (order by seconds) from first_response)::float8 as overall_median_seconds
    from days
      left join conv_days cd on cd.day = days.day
      left join message_days md on md.day = days.day
      left join feedback_days fd on fd.day = days.day
      left join gap_days gd on gd.day = days.day
      left join response_days rd on rd.day = days.day
    order by days.day
  `;
}

/** The filters as SQL: the agent's join and the context's conditions on conversations `c`. */
function filterParts(tenantId: string, filters: ReportFilters) {
  const agentJoin =
    filters.agent_name === undefined
      ? sql``
      : sql`join agents a on a.id = c.agent_id and a.tenant_id = ${tenantId} and lower(a.name) = lower(${filters.agent_name})`;
  const context = (field: string, value: string | undefined) =>
    value === undefined ? sql`` : sql`and c.context ->> ${field} = ${value}`;
  const byContext = sql`${context('user_type', filters.user_type)} ${context('organization', filters.organization)}`;
  const filtered =
    filters.agent_name !== undefined || filters.user_type !== undefined || filters.organization !== undefined;
  return { agentJoin, byContext, filtered };
}

/**
 * `and exists (…)`: the conversation `column` names passes the filters (nothing without filters),
 * for rows of tables other than `conversations`.
 */
export function inFilteredConversation(tenantId: string, filters: ReportFilters, column: string): RawBuilder<unknown> {
  const { agentJoin, byContext, filtered } = filterParts(tenantId, filters);
  return filtered
    ? sql`and exists (select 1 from conversations c ${agentJoin} where c.id = ${sql.ref(column)}
        and c.tenant_id = ${tenantId} ${byContext})`
    : sql``;
}

function scopeOf(tenantId: string, filters: ReportFilters, start: string, end: string): Scope {
  const { agentJoin, byContext } = filterParts(tenantId, filters);
  return {
    tenantId,
    from: new Date(`${start}T00:00:00.000Z`),
    to: new Date(Date.parse(`${end}T00:00:00.000Z`) + DAY_MS),
    agentJoin,
    byContext,
    inFiltered: (column) => inFilteredConversation(tenantId, filters, column),
    customersOnly: (column, nullable = false) => isCustomerConversation(tenantId, column, { nullable }),
  };
}

/** A customer's own message, of the messages aliased `alias`. */
const customer = (alias: string) =>
  sql`${sql.ref(`${alias}.role`)} = 'user' and ${sql.ref(`${alias}.author`)} = 'customer' and not ${sql.ref(`${alias}.hidden`)}`;

/**
 * The conversations started in the range, one row each (`per_conv`: answered, handed off,
 * disliked, with a gap; first customer message and first reply), their first-response times, and
 * their counts per day (`conv_days`).
 */
function conversationDays({ tenantId, from, to, agentJoin, byContext, customersOnly }: Scope) {
  return sql`conv_rows as (
      select c.id, c.created_at as started_at, m.role, m.status, m.content <> '' as has_content,
        m.created_at, m.updated_at,
        min(m.created_at) filter (where ${customer('m')}) over (partition by c.id) as first_customer_at
      from conversations c ${agentJoin}
        left join messages m on m.conversation_id = c.id and m.tenant_id = ${tenantId}
      where c.tenant_id = ${tenantId} and c.created_at >= ${from} and c.created_at < ${to}
        ${byContext}
    ),
    per_conv as (
      select id, (min(started_at) at time zone 'UTC')::date as day,
        min(first_customer_at) as first_customer_at,
        min(updated_at) filter (where role = 'assistant' and status = 'COMPLETED'
          and created_at >= first_customer_at) as first_reply_at,
        coalesce(bool_or(role = 'assistant' and status = 'COMPLETED' and has_content), false) as answered,
        id in (select t.conversation_id from tickets t where t.tenant_id = ${tenantId}) as handed_off,
        id in (select f.conversation_id from message_feedback f
               where f.tenant_id = ${tenantId} and f.rating = 'negative') as disliked,
        coalesce(id in (select o.conversation_id from knowledge_gap_occurrences o
               where o.tenant_id = ${tenantId} and o.conversation_id is not null), false) as gap
      from conv_rows group by id
      -- Filtered here, after the grouping, so that the plan of conv_rows stays as it is.
      having ${customersOnly('id')}
    ),
    first_response as (
      select day, extract(epoch from (first_reply_at - first_customer_at))::float8 as seconds
      from per_conv where first_customer_at is not null and first_reply_at is not null
    ),
    conv_days as (
      select day, count(*)::int as conversations,
        (count(*) filter (where handed_off))::int as handoffs,
        (count(*) filter (where answered and not handed_off and not disliked and not gap))::int as resolved
      from per_conv group by day
    )`;
}

/** What happened in the range, per day: customer messages, feedback, knowledge gaps opened. */
function activityDays({ tenantId, from, to, inFiltered, customersOnly }: Scope) {
  return sql`message_days as (
      select (m.created_at at time zone 'UTC')::date as day, count(*)::int as customer_messages
      from messages m
      where m.tenant_id = ${tenantId} and m.created_at >= ${from} and m.created_at < ${to} and ${customer('m')}
        and ${customersOnly('m.conversation_id')} ${inFiltered('m.conversation_id')}
      group by 1
    ),
    feedback_days as (
      select (f.created_at at time zone 'UTC')::date as day,
        (count(*) filter (where f.rating = 'positive'))::int as positive,
        (count(*) filter (where f.rating = 'negative'))::int as negative
      from message_feedback f
      where f.tenant_id = ${tenantId} and f.created_at >= ${from} and f.created_at < ${to}
        and ${customersOnly('f.conversation_id')} ${inFiltered('f.conversation_id')}
      group by 1
    ),
    gap_days as (
      select (k.created_at at time zone 'UTC')::date as day, count(*)::int as gaps
      from knowledge_update_requests k
      where k.tenant_id = ${tenantId} and k.created_at >= ${from} and k.created_at < ${to}
        and ${customersOnly('k.conversation_id', true)} ${inFiltered('k.conversation_id')}
      group by 1
    )`;
}
