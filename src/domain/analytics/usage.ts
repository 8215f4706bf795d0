// The dashboard report's model usage (docs/coverage-and-analytics.md): input and output tokens and
// their cost, per day and per agent, summed from the stored turn traces (`message_traces`) of the
// range. A turn counts on the UTC day it started, for the agent that ran it. The report's filters
// apply through the turn's conversation, as for its other figures; simulated conversations never
// count. The report's usage is its response schema, the type derived from it.
import { type Static, Type } from '@sinclair/typebox';
import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { Nullable, Uuid } from '../shapes.js';
import { inFilteredConversation, type ReportFilters } from './report-query.js';

const usageTotals = {
  turns: Type.Integer({ description: 'Agent turns that started in the range (or that day, or by that agent).' }),
  input_tokens: Type.Integer({ description: "Input tokens of their provider calls, from the provider's `usage`." }),
  output_tokens: Type.Integer({ description: "Output tokens of their provider calls, from the provider's `usage`." }),
  cost: Nullable(
    Type.Number({ description: 'The cost of the calls whose model MODEL_PRICES prices; null when none is priced.' }),
  ),
};
const UsageTotals = Type.Object(usageTotals);
export type UsageTotals = Static<typeof UsageTotals>;

export const UsageReport = Type.Object(
  {
    ...usageTotals,
    series: Type.Array(Type.Object({ date: Type.String({ description: 'A UTC day, YYYY-MM-DD.' }), ...usageTotals }), {
      description: 'One entry per day of the range, zero-filled.',
    }),
    by_agent: Type.Array(
      Type.Object({
        agent_id: Nullable(Uuid),
        agent_name: Nullable(Type.String()),
        ...usageTotals,
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
export type UsageReport = Static<typeof UsageReport>;

type UsageRow = {
  date: string;
  agent_id: string | null;
  agent_name: string | null;
  turns: number;
  input_tokens: string | number;
  output_tokens: string | number;
  cost: number | null;
};

function usageQuery(tenantId: string, filters: ReportFilters, from: Date, to: Date): RawBuilder<UsageRow> {
  const filtered = inFilteredConversation(tenantId, filters, 't.conversation_id');
  return sql<UsageRow>`
    select (t.created_at at time zone 'UTC')::date::text as date, t.agent_id,
      (select a.name from agents a where a.id = t.agent_id and a.tenant_id = ${tenantId}) as agent_name,
      count(*)::int as turns, sum(t.input_tokens)::bigint as input_tokens,
      sum(t.output_tokens)::bigint as output_tokens, sum(t.cost)::float8 as cost
    from message_traces t
    where t.tenant_id = ${tenantId} and t.created_at >= ${from} and t.created_at < ${to}
      and ${isCustomerConversation(tenantId, 't.conversation_id')} ${filtered}
    group by 1, 2
    order by 1, 2`;
}

const round = (cost: number | null) => (cost === null ? null : Math.round(cost * 1e10) / 1e10);

function add(into: UsageTotals, row: UsageRow) {
  into.turns += Number(row.turns);
  into.input_tokens += Number(row.input_tokens);
  into.output_tokens += Number(row.output_tokens);
  if (row.cost !== null) into.cost = round((into.cost ?? 0) + Number(row.cost));
}

const empty = (): UsageTotals => ({ turns: 0, input_tokens: 0, output_tokens: 0, cost: null });

/** Tokens and cost over `days` (the report's UTC days, in order), in `trx`, the report's transaction. */
export async function usageReport(
  trx: Db,
  tenantId: string,
  filters: ReportFilters,
  days: string[],
): Promise<UsageReport> {
  const from = new Date(`${days[0]}T00:00:00.000Z`);
  const to = new Date(Date.parse(`${days[days.length - 1]}T00:00:00.000Z`) + 86_400_000);
  const { rows } = await usageQuery(tenantId, filters, from, to).execute(trx);
  const total = empty();
  const byDay = new Map(days.map((date) => [date, { date, ...empty() }]));
  const byAgent = new Map<string | null, UsageReport['by_agent'][number]>();
  for (const row of rows) {
    add(total, row);
    const day = byDay.get(row.date);
    if (day) add(day, row);
    const agent = byAgent.get(row.agent_id) ?? { agent_id: row.agent_id, agent_name: row.agent_name, ...empty() };
    add(agent, row);
    byAgent.set(row.agent_id, agent);
  }
  const agents = [...byAgent.values()].sort(
    (a, b) => b.input_tokens + b.output_tokens - (a.input_tokens + a.output_tokens) || b.turns - a.turns,
  );
  return { ...total, series: [...byDay.values()], by_agent: agents };
}
