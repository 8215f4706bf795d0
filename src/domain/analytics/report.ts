// Dashboard analytics (DESIGN.md §7; docs/coverage-and-analytics.md): one report over a range of
// whole UTC days, computed in SQL from the conversation tables — conversations, customer
// messages, resolution and handoff rates, feedback, knowledge gaps opened, median first-response
// time — and a zero-filled daily series.
//
// Time limit (spec error `export_failed`): the report runs as a heavy query (src/db/heavy-queries.ts)
// in a transaction with `statement_timeout` set locally to ANALYTICS_TIMEOUT_MS, so PostgreSQL
// cancels a statement that outruns it; and a JS deadline of the same length answers even if the
// database does not. PGlite has no statement timeout (it ignores the setting): there the deadline
// answers, while the statement runs to its end in the database's thread (src/db/pglite-thread.ts).
// It shares the heavy queries' slots with full-text searches: none free in time answers 503.
import { type RawBuilder, sql } from 'kysely';
import type { HeavyQueries } from '../../db/heavy-queries.js';
import { startsWithCalendarDate } from '../../lib/time.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { DomainError, MissingParameterError, ValidationError } from '../errors.js';
import { tooManyHeavyQueries } from '../knowledge/text-search.js';
import { type UsageReport, usageReport } from './usage.js';

export const REPORT_TYPES = ['last_7_days', 'last_30_days', 'last_90_days', 'custom'] as const;
export type ReportType = (typeof REPORT_TYPES)[number];
/** The longest custom range, in days (both ends included). */
export const MAX_RANGE_DAYS = 366;

const PRESET_DAYS: Record<Exclude<ReportType, 'custom'>, number> = {
  last_7_days: 7,
  last_30_days: 30,
  last_90_days: 90,
};

export interface DashboardInput {
  report_type: ReportType;
  start_date?: string | undefined;
  end_date?: string | undefined;
  user_type?: string | undefined;
  agent_name?: string | undefined;
  organization?: string | undefined;
  tab?: string | undefined;
}

export interface DashboardMetrics {
  conversations: number;
  customer_messages: number;
  resolved_conversations: number;
  /** resolved / conversations (0–1, four decimals); null without conversations. */
  resolution_rate: number | null;
  handed_off_conversations: number;
  /** conversations with a handoff ticket / conversations (0–1); null without conversations. */
  handoff_rate: number | null;
  feedback_positive: number;
  feedback_negative: number;
  knowledge_gaps_opened: number;
  /** Median seconds from a conversation's first customer message to the agent's first completed reply. */
  median_first_response_seconds: number | null;
}

export interface DashboardDay {
  date: string;
  conversations: number;
  customer_messages: number;
  resolved_conversations: number;
  handed_off_conversations: number;
  feedback_positive: number;
  feedback_negative: number;
  knowledge_gaps_opened: number;
  median_first_response_seconds: number | null;
}

export interface DashboardReport {
  object: 'analytics_report';
  report_type: ReportType;
  start_date: string;
  end_date: string;
  filters: { user_type: string | null; agent_name: string | null; organization: string | null; tab: string | null };
  metrics: DashboardMetrics;
  series: DashboardDay[];
  /** Model tokens and cost from the turns' traces, per day and per agent (./analytics-usage.ts). */
  usage: UsageReport;
}

const DAY_MS = 86_400_000;

function parseDate(value: string, param: string): number {
  if (value.length !== 10 || !startsWithCalendarDate(value)) {
    throw new ValidationError(param, `${param} must be a calendar date (YYYY-MM-DD).`);
  }
  return Date.parse(`${value}T00:00:00.000Z`);
}

const day = (time: number) => new Date(time).toISOString().slice(0, 10);

/** The report's first and last UTC day, both included. */
export function resolveRange(input: DashboardInput, now: Date = new Date()): { start: string; end: string } {
  if (input.report_type !== 'custom') {
    for (const param of ['start_date', 'end_date'] as const) {
      if (input[param] !== undefined) {
        throw new ValidationError(param, `${param} is only taken with report_type 'custom'.`);
      }
    }
    const today = Date.parse(`${now.toISOString().slice(0, 10)}T00:00:00.000Z`);
    return { start: day(today - (PRESET_DAYS[input.report_type] - 1) * DAY_MS), end: day(today) };
  }
  if (input.start_date === undefined) throw new MissingParameterError('start_date');
  if (input.end_date === undefined) throw new MissingParameterError('end_date');
  const start = parseDate(input.start_date, 'start_date');
  const end = parseDate(input.end_date, 'end_date');
  if (end < start) throw new ValidationError('end_date', 'end_date must not be before start_date.');
  const days = (end - start) / DAY_MS + 1;
  if (days > MAX_RANGE_DAYS) {
    throw new ValidationError(
      'end_date',
      `The range covers ${days} days; at most ${MAX_RANGE_DAYS} are allowed. Use a shorter range.`,
    );
  }
  return { start: day(start), end: day(end) };
}

type SeriesRow = {
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

const rate = (part: number, whole: number) => (whole === 0 ? null : Math.round((part / whole) * 10_000) / 10_000);
const seconds = (value: number | null) => (value === null ? null : Math.round(Number(value) * 1000) / 1000);

function exportFailed(timeoutMs: number): DomainError {
  return new DomainError(
    'export_failed',
    `The report did not finish within ${timeoutMs} ms; use a smaller date range or retry later.`,
  );
}

export interface AnalyticsServiceDeps {
  /** Reports run as heavy queries (src/db/heavy-queries.ts), beside full-text searches. */
  heavy: HeavyQueries;
  /** ANALYTICS_TIMEOUT_MS. */
  timeoutMs: number;
  now?: () => Date;
}

export function createAnalyticsService(deps: AnalyticsServiceDeps) {
  const { heavy, timeoutMs } = deps;
  const now = deps.now ?? (() => new Date());

  /** The report's one statement: a row per day of the range, and the overall median on each. */
  function reportQuery(tenantId: string, input: DashboardInput, start: string, end: string): RawBuilder<SeriesRow> {
    const from = new Date(`${start}T00:00:00.000Z`);
    const to = new Date(Date.parse(`${end}T00:00:00.000Z`) + DAY_MS);
    const filtered =
      input.agent_name !== undefined || input.user_type !== undefined || input.organization !== undefined;
    const agentJoin =
      input.agent_name === undefined
        ? sql``
        : sql`join agents a on a.id = c.agent_id and a.tenant_id = ${tenantId} and lower(a.name) = lower(${input.agent_name})`;
    const byContext = (field: string, value: string | undefined) =>
      value === undefined ? sql`` : sql`and c.context ->> ${field} = ${value}`;
    // Rows of other tables count only when their conversation passes the filters.
    const inFiltered = (column: string) =>
      filtered
        ? sql`and exists (select 1 from conversations c ${agentJoin} where c.id = ${sql.ref(column)}
            and c.tenant_id = ${tenantId} ${byContext('user_type', input.user_type)}
            ${byContext('organization', input.organization)})`
        : sql``;
    // A conversation a simulation case is playing (deleted when the case ends) is not a customer's.
    const customersOnly = (column: string, nullable = false) => isCustomerConversation(tenantId, column, { nullable });
    const customer = (alias: string) =>
      sql`${sql.ref(`${alias}.role`)} = 'user' and ${sql.ref(`${alias}.author`)} = 'customer' and not ${sql.ref(`${alias}.hidden`)}`;

    return sql<SeriesRow>`
      -- Plans must not depend on table statistics (PGlite never analyses): no joins between
      -- derived relations, only base tables (indexed) and hashed sub-plans.
      with conv_rows as (
        select c.id, c.created_at as started_at, m.role, m.status, m.content <> '' as has_content,
          m.created_at, m.updated_at,
          min(m.created_at) filter (where ${customer('m')}) over (partition by c.id) as first_customer_at
        from conversations c ${agentJoin}
          left join messages m on m.conversation_id = c.id and m.tenant_id = ${tenantId}
        where c.tenant_id = ${tenantId} and c.created_at >= ${from} and c.created_at < ${to}
          ${byContext('user_type', input.user_type)} ${byContext('organization', input.organization)}
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
      ),
      message_days as (
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
      ),
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

  const limit = { timeoutMs, tooLong: () => exportFailed(timeoutMs), busy: tooManyHeavyQueries };

  return {
    async dashboard(tenantId: string, input: DashboardInput): Promise<DashboardReport> {
      const { start, end } = resolveRange(input, now());
      const { rows, usage } = await heavy.run(tenantId, limit, async (trx) => {
        const { rows } = await reportQuery(tenantId, input, start, end).execute(trx);
        return {
          rows,
          usage: await usageReport(
            trx,
            tenantId,
            input,
            rows.map((r) => r.date),
          ),
        };
      });
      const sum = (pick: (row: SeriesRow) => number) => rows.reduce((n, row) => n + Number(pick(row)), 0);
      const conversations = sum((r) => r.conversations);
      const resolved = sum((r) => r.resolved);
      const handoffs = sum((r) => r.handoffs);
      return {
        object: 'analytics_report',
        report_type: input.report_type,
        start_date: start,
        end_date: end,
        filters: {
          user_type: input.user_type ?? null,
          agent_name: input.agent_name ?? null,
          organization: input.organization ?? null,
          tab: input.tab ?? null,
        },
        metrics: {
          conversations,
          customer_messages: sum((r) => r.customer_messages),
          resolved_conversations: resolved,
          resolution_rate: rate(resolved, conversations),
          handed_off_conversations: handoffs,
          handoff_rate: rate(handoffs, conversations),
          feedback_positive: sum((r) => r.feedback_positive),
          feedback_negative: sum((r) => r.feedback_negative),
          knowledge_gaps_opened: sum((r) => r.gaps),
          median_first_response_seconds: seconds(rows[0]?.overall_median_seconds ?? null),
        },
        series: rows.map((r) => ({
          date: r.date,
          conversations: Number(r.conversations),
          customer_messages: Number(r.customer_messages),
          resolved_conversations: Number(r.resolved),
          handed_off_conversations: Number(r.handoffs),
          feedback_positive: Number(r.feedback_positive),
          feedback_negative: Number(r.feedback_negative),
          knowledge_gaps_opened: Number(r.gaps),
          median_first_response_seconds: seconds(r.median_seconds),
        })),
        usage,
      };
    },
  };
}

export type AnalyticsService = ReturnType<typeof createAnalyticsService>;
