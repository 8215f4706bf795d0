// Dashboard analytics (DESIGN.md §7; docs/coverage-and-analytics.md): one report over a range of
// whole UTC days (report-range.ts), computed in SQL from the conversation tables
// (report-query.ts) — conversations, customer messages, resolution and handoff rates, feedback,
// knowledge gaps opened, median first-response time — and a zero-filled daily series. The report
// is its response schema, the type derived from it.
//
// Time limit (spec error `export_failed`): the report runs as a heavy query (src/db/heavy-queries.ts)
// in a transaction with `statement_timeout` set locally to ANALYTICS_TIMEOUT_MS, so PostgreSQL
// cancels a statement that outruns it; and a JS deadline of the same length answers even if the
// database does not. PGlite has no statement timeout (it ignores the setting): there the deadline
// answers, while the statement runs to its end in the database's thread (src/db/pglite-thread.ts).
// It shares the heavy queries' slots with full-text searches: none free in time answers 503.
import { type Static, Type } from '@sinclair/typebox';
import type { HeavyQueries } from '../../db/index.js';
import { DomainError } from '../errors.js';
import { tooManyHeavyQueries } from '../knowledge/text-search.js';
import { Nullable } from '../shapes.js';
import { type ReportFilters, reportQuery, type SeriesRow } from './report-query.js';
import { type RangeInput, resolveRange } from './report-range.js';
import { UsageReport, usageReport } from './usage.js';

export { MAX_RANGE_DAYS, REPORT_TYPES, type ReportType, resolveRange } from './report-range.js';

export interface DashboardInput extends RangeInput, ReportFilters {
  tab?: string | undefined;
}

export const DashboardMetrics = Type.Object({
  conversations: Type.Integer({ description: 'Conversations started in the range.' }),
  customer_messages: Type.Integer({ description: 'Messages customers sent in the range.' }),
  resolved_conversations: Type.Integer(),
  resolution_rate: Nullable(
    Type.Number({
      description:
        'Of the conversations started in the range, the share (0–1) the agent answered with no handoff ticket, no ' +
        'knowledge gap and no negative feedback. Null without conversations.',
    }),
  ),
  handed_off_conversations: Type.Integer(),
  handoff_rate: Nullable(Type.Number({ description: 'Share (0–1) of those conversations with a handoff ticket.' })),
  feedback_positive: Type.Integer(),
  feedback_negative: Type.Integer(),
  knowledge_gaps_opened: Type.Integer({ description: 'Knowledge update requests recorded in the range.' }),
  median_first_response_seconds: Nullable(
    Type.Number({
      description: "Median time from a conversation's first customer message to the agent's first completed reply.",
    }),
  ),
});
export type DashboardMetrics = Static<typeof DashboardMetrics>;

export const DashboardDay = Type.Object({
  date: Type.String({ description: 'A UTC day, YYYY-MM-DD.' }),
  conversations: Type.Integer(),
  customer_messages: Type.Integer(),
  resolved_conversations: Type.Integer(),
  handed_off_conversations: Type.Integer(),
  feedback_positive: Type.Integer(),
  feedback_negative: Type.Integer(),
  knowledge_gaps_opened: Type.Integer(),
  median_first_response_seconds: Nullable(Type.Number()),
});
export type DashboardDay = Static<typeof DashboardDay>;

export const DashboardReport = Type.Object(
  {
    object: Type.Literal('analytics_report'),
    report_type: Type.String(),
    start_date: Type.String({ description: 'First UTC day of the report.' }),
    end_date: Type.String({ description: 'Last UTC day of the report (included).' }),
    filters: Type.Object({
      user_type: Nullable(Type.String()),
      agent_name: Nullable(Type.String()),
      organization: Nullable(Type.String()),
      tab: Nullable(Type.String()),
    }),
    metrics: DashboardMetrics,
    series: Type.Array(DashboardDay, { description: 'One entry per day of the range, zero-filled.' }),
    /** Model tokens and cost from the turns' traces, per day and per agent (./usage.ts). */
    usage: UsageReport,
  },
  { title: 'AnalyticsReport' },
);
export type DashboardReport = Static<typeof DashboardReport>;

export interface AnalyticsServiceDeps {
  /** Reports run as heavy queries (src/db/heavy-queries.ts), beside full-text searches. */
  heavy: HeavyQueries;
  /** ANALYTICS_TIMEOUT_MS. */
  timeoutMs: number;
  now?: () => Date;
}

export function createAnalyticsService(deps: AnalyticsServiceDeps) {
  return {
    dashboard: (tenantId: string, input: DashboardInput) => dashboard(deps, tenantId, input),
  };
}

export type AnalyticsService = ReturnType<typeof createAnalyticsService>;

async function dashboard(
  { heavy, timeoutMs, now = () => new Date() }: AnalyticsServiceDeps,
  tenantId: string,
  input: DashboardInput,
): Promise<DashboardReport> {
  const { start, end } = resolveRange(input, now());
  const limit = { timeoutMs, tooLong: () => exportFailed(timeoutMs), busy: tooManyHeavyQueries };
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
    metrics: metricsOf(rows),
    series: rows.map(toDay),
    usage,
  };
}

function exportFailed(timeoutMs: number): DomainError {
  return new DomainError(
    'export_failed',
    `The report did not finish within ${timeoutMs} ms; use a smaller date range or retry later.`,
  );
}

const rate = (part: number, whole: number) => (whole === 0 ? null : Math.round((part / whole) * 10_000) / 10_000);
const seconds = (value: number | null) => (value === null ? null : Math.round(Number(value) * 1000) / 1000);

/** The range's totals; the median is the statement's overall one, not a median of the days'. */
function metricsOf(rows: SeriesRow[]): DashboardMetrics {
  const sum = (pick: (row: SeriesRow) => number) => rows.reduce((n, row) => n + Number(pick(row)), 0);
  const conversations = sum((r) => r.conversations);
  const resolved = sum((r) => r.resolved);
  const handoffs = sum((r) => r.handoffs);
  return {
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
  };
}

const toDay = (r: SeriesRow): DashboardDay => ({
  date: r.date,
  conversations: Number(r.conversations),
  customer_messages: Number(r.customer_messages),
  resolved_conversations: Number(r.resolved),
  handed_off_conversations: Number(r.handoffs),
  feedback_positive: Number(r.feedback_positive),
  feedback_negative: Number(r.feedback_negative),
  knowledge_gaps_opened: Number(r.gaps),
  median_first_response_seconds: seconds(r.median_seconds),
});
