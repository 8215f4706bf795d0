// Prometheus metrics (prom-client): one registry and every metric the service exposes at
// GET /metrics (docs/operations.md says what each tells). Hot paths call the small `record…`
// functions below; the request recorders resolve their label sets once per route (or tool) and
// status class. Gauges that cost a query are collected at scrape time (scrape-gauges.ts).
//
// Tenant ids are never a label: the series a tenant could add would grow without bound with the
// tenants, and the request log line names the tenant of every request.
import { Counter, collectDefaultMetrics, Gauge, Histogram, type Metric, Registry } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

/** Few buckets: every observation walks them, and a scrape carries one series per bucket. */
const REQUEST_BUCKETS = [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10];
const SECONDS_BUCKETS = [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30];

/** What a request label set holds; `operation` is a registry operation id, or a fixed name. */
type RequestLabels = Record<'operation' | 'method' | 'status_class' | 'transport', string>;

/** One request label set's figures: its count, the sum of its durations and a count per bucket. */
interface RequestCell {
  labels: RequestLabels;
  count: number;
  sum: number;
  /** Not cumulative: `buckets[i]` counts durations in (REQUEST_BUCKETS[i-1], REQUEST_BUCKETS[i]]; the last, above them all. */
  buckets: number[];
}

// Requests are counted in plain numbers, not through prom-client's counter and histogram, whose
// every observation builds its label set's key; a scrape turns them into the exposition below.
const requestCells = new Map<string, RequestCell>();

function requestCell(labels: RequestLabels): RequestCell {
  const key = `${labels.operation}\n${labels.method}\n${labels.status_class}\n${labels.transport}`;
  let cell = requestCells.get(key);
  if (cell === undefined) {
    cell = { labels, count: 0, sum: 0, buckets: new Array(REQUEST_BUCKETS.length + 1).fill(0) };
    requestCells.set(key, cell);
  }
  return cell;
}

const REQUESTS_HELP =
  'Requests answered, by operation id (or route name; "unmatched" for a path with no route), method, status class and transport (rest: an HTTP request; mcp: one MCP tool call, under the operation id of the tool).';
const DURATION_HELP =
  'Time from a request (or MCP tool call) arriving to its answer being sent, by the labels of http_requests_total.';

/** A metric prom-client's registry formats like its own: what `get()` answers at scrape time. */
function scrapedMetric(name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValue[]): void {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: values() }),
    // Zeroed, not forgotten: the recorders keep their cells.
    reset: () => {
      for (const cell of requestCells.values()) {
        cell.count = 0;
        cell.sum = 0;
        cell.buckets.fill(0);
      }
    },
  };
  registry.registerMetric(metric as unknown as Metric);
}

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

scrapedMetric('http_requests_total', REQUESTS_HELP, 'counter', () =>
  [...requestCells.values()].map((cell) => ({ labels: cell.labels, value: cell.count })),
);

scrapedMetric('http_request_duration_seconds', DURATION_HELP, 'histogram', () => {
  const values: MetricValue[] = [];
  for (const cell of requestCells.values()) {
    let cumulative = 0;
    for (const [i, bound] of REQUEST_BUCKETS.entries()) {
      cumulative += cell.buckets[i] ?? 0;
      values.push({
        labels: { ...cell.labels, le: bound },
        value: cumulative,
        metricName: 'http_request_duration_seconds_bucket',
      });
    }
    values.push({
      labels: { ...cell.labels, le: '+Inf' },
      value: cell.count,
      metricName: 'http_request_duration_seconds_bucket',
    });
    values.push({ labels: cell.labels, value: cell.sum, metricName: 'http_request_duration_seconds_sum' });
    values.push({ labels: cell.labels, value: cell.count, metricName: 'http_request_duration_seconds_count' });
  }
  return values;
});

const refusals = new Counter({
  name: 'http_requests_refused_total',
  help: 'Requests (and MCP tool calls) refused by a limit or a permission, by the error code answered: rate_limit_exceeded, insufficient_scope, request_too_large, concurrency_limit_exceeded, turn_limit_exceeded, forbidden_origin.',
  labelNames: ['reason', 'transport'] as const,
  registers: [registry],
});

const jobsFinished = new Counter({
  name: 'jobs_finished_total',
  help: 'Job runs ended, by kind and outcome: succeeded, retry (failed, queued again), failed (for good), stopped (server stopping or lease lost: queued again), lost (ended after its lease passed on).',
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});

const jobDuration = new Histogram({
  name: 'job_run_duration_seconds',
  help: 'Duration of job runs (the handler), by kind.',
  labelNames: ['kind'] as const,
  buckets: [0.01, 0.1, 1, 10, 60, 300],
  registers: [registry],
});

const webhookDeliveries = new Counter({
  name: 'webhook_deliveries_total',
  help: 'Webhook delivery attempts, by outcome: succeeded (2xx), failed_status (another status, redirects included), failed_connection (no answer: refused, timed out, blocked address).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

const webhookDuration = new Histogram({
  name: 'webhook_delivery_duration_seconds',
  help: "Duration of webhook delivery attempts (the receiver's answer), by outcome.",
  labelNames: ['outcome'] as const,
  buckets: [0.05, 0.25, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

/** MCP slots this process holds now (the pool may be shared through Redis: see docs/operations.md). */
let mcpSlotsHeld = 0;
new Gauge({
  name: 'mcp_slots_in_use',
  help: 'MCP concurrency slots held by requests of this process (MCP_MAX_CONCURRENT is the limit, per process or across instances with Redis).',
  registers: [registry],
  collect() {
    this.set(mcpSlotsHeld);
  },
});

const agentTurns = new Counter({
  name: 'agent_turns_total',
  help: 'Agent turns ended, by model provider and final status.',
  labelNames: ['provider', 'status'] as const,
  registers: [registry],
});

const agentTurnDuration = new Histogram({
  name: 'agent_turn_duration_seconds',
  help: 'Duration of agent turns, by model provider.',
  labelNames: ['provider'] as const,
  buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  registers: [registry],
});

const knowledgeSearchDuration = new Histogram({
  name: 'knowledge_search_duration_seconds',
  help: 'Duration of knowledge searches (documents and sources) made for agent turns and by the API.',
  buckets: SECONDS_BUCKETS,
  registers: [registry],
});

const embeddingsRequests = new Counter({
  name: 'embeddings_requests_total',
  help: 'Requests to the embeddings server (each try), by outcome: succeeded, or why one failed (timeout, unreachable, rejected, invalid_response, aborted). A question that cannot be embedded is answered from the lexical ranking alone.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export type Transport = 'rest' | 'mcp';

/** `404` → `4xx`. */
export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

/**
 * The recorder of one route (or tool): its label sets are looked up once per status class, so a
 * request costs a few additions.
 */
export function requestRecorder(
  operation: string,
  method: string,
  transport: Transport,
): (status: number, seconds: number) => void {
  const cells: (RequestCell | undefined)[] = [];
  const last = REQUEST_BUCKETS.length;
  return (status, seconds) => {
    const hundreds = Math.floor(status / 100);
    let cell = cells[hundreds];
    if (cell === undefined) {
      cell = requestCell({ operation, method, status_class: `${hundreds}xx`, transport });
      cells[hundreds] = cell;
    }
    cell.count++;
    cell.sum += seconds;
    let bucket = 0;
    while (bucket < last && seconds > (REQUEST_BUCKETS[bucket] as number)) bucket++;
    cell.buckets[bucket] = (cell.buckets[bucket] ?? 0) + 1;
  };
}

/** The error codes counted as refusals (http_requests_refused_total). */
const REFUSALS = new Set([
  'rate_limit_exceeded',
  'insufficient_scope',
  'request_too_large',
  'concurrency_limit_exceeded',
  'turn_limit_exceeded',
  'forbidden_origin',
]);

/** An error answered with `code`: counted when it is a refusal by a limit or a permission. */
export function recordRefusal(code: string, transport: Transport = 'rest'): void {
  if (REFUSALS.has(code)) refusals.labels(code, transport).inc();
}

export type JobOutcome = 'succeeded' | 'retry' | 'failed' | 'stopped' | 'lost';

/** A job run ended: its kind, outcome and the seconds its handler took. */
export function recordJob(kind: string, outcome: JobOutcome, seconds: number): void {
  jobsFinished.labels(kind, outcome).inc();
  jobDuration.labels(kind).observe(seconds);
}

export type WebhookOutcome = 'succeeded' | 'failed_status' | 'failed_connection';

/** A webhook delivery attempt ended. */
export function recordWebhookDelivery(outcome: WebhookOutcome, seconds: number): void {
  webhookDeliveries.labels(outcome).inc();
  webhookDuration.labels(outcome).observe(seconds);
}

/** An MCP slot taken (+1) or given back (-1) by this process. */
export function countMcpSlot(change: 1 | -1): void {
  mcpSlotsHeld += change;
}

/** An agent turn ended: its provider (`builtin`, `openai`…), final status, and duration. */
export function recordTurn(provider: string, status: string, seconds: number): void {
  agentTurns.labels(provider, status).inc();
  agentTurnDuration.labels(provider).observe(seconds);
}

/** A knowledge search ran, taking `seconds`. */
export function recordKnowledgeSearch(seconds: number): void {
  knowledgeSearchDuration.observe(seconds);
}

/** A request to the embeddings server ended: `succeeded`, or the reason it failed. */
export function recordEmbeddingsRequest(outcome: string): void {
  embeddingsRequests.labels(outcome).inc();
}
