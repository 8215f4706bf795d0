// Dashboard analytics (scope `analytics`, DESIGN.md §3, §7): POST /analytics/dashboard is a read.
// Spec: Dashboard analytics request fields (report_type, start_date, end_date, user_type,
// agent_name, organization, tab) and the `export_failed` error.
import { Type } from '@sinclair/typebox';
import { REPORT_TYPES } from '../../domain/analytics/report.js';
import { Nullable, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const DateString = (description: string) =>
  Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: `${description} (YYYY-MM-DD, UTC).` });
const Filter = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 200, description }));

const Metrics = Type.Object({
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

const Day = Type.Object({
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

const usageFields = {
  turns: Type.Integer({ description: 'Agent turns that started in the range (or that day, or by that agent).' }),
  input_tokens: Type.Integer({ description: "Input tokens of their provider calls, from the provider's `usage`." }),
  output_tokens: Type.Integer({ description: "Output tokens of their provider calls, from the provider's `usage`." }),
  cost: Nullable(
    Type.Number({ description: 'The cost of the calls whose model MODEL_PRICES prices; null when none is priced.' }),
  ),
};

const Usage = Type.Object(
  {
    ...usageFields,
    series: Type.Array(Type.Object({ date: Type.String({ description: 'A UTC day, YYYY-MM-DD.' }), ...usageFields }), {
      description: 'One entry per day of the range, zero-filled.',
    }),
    by_agent: Type.Array(
      Type.Object({
        agent_id: Nullable(Uuid),
        agent_name: Nullable(Type.String()),
        ...usageFields,
      }),
      { description: 'Per agent that ran turns in the range, most tokens first.' },
    ),
  },
  {
    description:
      "Model usage from the turns' traces (GET /messages/{id}/trace): a turn counts on the UTC day it started, " +
      'for the agent that ran it. The built-in provider runs no model: its turns count 0 tokens.',
  },
);

const Report = Type.Object(
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
    metrics: Metrics,
    series: Type.Array(Day, { description: 'One entry per day of the range, zero-filled.' }),
    usage: Usage,
  },
  { title: 'AnalyticsReport' },
);

export const analyticsOperations = [
  defineOperation({
    id: 'getDashboardAnalytics',
    method: 'POST',
    path: '/api/v1/analytics/dashboard',
    scope: 'analytics:read',
    tag: 'Analytics',
    summary: 'Get dashboard analytics',
    description:
      'Computes the dashboard report over whole UTC days: the last 7, 30 or 90 days ending today, or a `custom` ' +
      'range of `start_date` to `end_date` (both required, at most 366 days). Filters: `agent_name` (the agent a ' +
      "conversation is with), `user_type` and `organization` (matched against the conversation's `context`); `tab` " +
      'is only echoed. Unknown filter values give zeros. A report that outruns the time limit answers 500 ' +
      '`export_failed`.',
    body: Type.Object(
      {
        report_type: Type.Unsafe<(typeof REPORT_TYPES)[number]>({ type: 'string', enum: [...REPORT_TYPES] }),
        start_date: Type.Optional(DateString('First day, with report_type custom')),
        end_date: Type.Optional(DateString('Last day (included), with report_type custom')),
        user_type: Filter('Only conversations whose context has this `user_type`.'),
        agent_name: Filter('Only conversations with the agent of this name (case-insensitive).'),
        organization: Filter('Only conversations whose context has this `organization`.'),
        tab: Filter('The dashboard tab asking; echoed in `filters`, it does not change the numbers.'),
      },
      { additionalProperties: false },
    ),
    response: Report,
    errors: ['missing_required_parameter', 'export_failed'],
    idempotent: true,
    handler: ({ tenantId, body, services }) => services.analytics.dashboard(tenantId, body),
  }),
];
