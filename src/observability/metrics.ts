// Prometheus metrics (prom-client): one registry and every metric the service exposes at
// GET /metrics (docs/operations.md says what each tells). Hot paths call the small `record…`
// functions below, whose label sets are resolved once per route (or tool) and kept; gauges that
// cost a query are collected at scrape time (src/observability/scrape-gauges.ts).
//
// Tenant ids are never a label: the series a tenant could add would grow without bound with the
// tenants, and the request log line names the tenant of every request.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

/** Few buckets: every observation walks them, and a scrape carries one series per bucket. */
const REQUEST_BUCKETS = [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10];
const SECONDS_BUCKETS = [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30];

/** What a request label set holds; `operation` is a registry operation id, or a fixed name. */
const REQUEST_LABELS = ['operation', 'method', 'status_class', 'transport'] as const;

const requests = new Counter({
  name: 'http_requests_total',
  help: 'Requests answered, by operation id (or route name; "unmatched" for a path with no route), method, status class and transport (rest: an HTTP request; mcp: one MCP tool call, under the operation id of the tool).',
  labelNames: REQUEST_LABELS,
  registers: [registry],
});

const requestDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'Time from a request (or MCP tool call) arriving to its answer being sent, by the labels of http_requests_total.',
  labelNames: REQUEST_LABELS,
  buckets: REQUEST_BUCKETS,
  registers: [registry],
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

export type Transport = 'rest' | 'mcp';

/** `404` → `4xx`. */
export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

/**
 * The recorder of one route (or tool): its label sets are looked up once per status class, so a
 * request costs an increment and an observation.
 */
export function requestRecorder(
  operation: string,
  method: string,
  transport: Transport,
): (status: number, seconds: number) => void {
  const children = new Map<
    number,
    { count: ReturnType<typeof requests.labels>; duration: ReturnType<typeof requestDuration.labels> }
  >();
  return (status, seconds) => {
    const hundreds = Math.floor(status / 100);
    let child = children.get(hundreds);
    if (child === undefined) {
      const labels = [operation, method, `${hundreds}xx`, transport] as const;
      child = { count: requests.labels(...labels), duration: requestDuration.labels(...labels) };
      children.set(hundreds, child);
    }
    child.count.inc();
    child.duration.observe(seconds);
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
