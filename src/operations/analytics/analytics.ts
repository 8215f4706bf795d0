// Dashboard analytics (scope `analytics`, DESIGN.md §3, §7): POST /analytics/dashboard is a read.
// Spec: Dashboard analytics request fields (report_type, start_date, end_date, user_type,
// agent_name, organization, tab) and the `export_failed` error.
import { Type } from '@sinclair/typebox';
import { DashboardReport, REPORT_TYPES } from '../../domain/analytics/report.js';
import { defineOperation } from '../registry.js';

const DateString = (description: string) =>
  Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: `${description} (YYYY-MM-DD, UTC).` });
const Filter = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 200, description }));

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
    response: DashboardReport,
    errors: ['missing_required_parameter', 'export_failed'],
    idempotent: true,
    handler: ({ tenantId, body, services }) => services.analytics.dashboard(tenantId, body),
  }),
];
