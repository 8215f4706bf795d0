// Prometheus metrics (prom-client): one registry and every metric the service exposes at
// GET /metrics (docs/operations.md says what each tells). Hot paths call the small `record…`
// functions below; gauges that cost a query are collected at scrape time.
import { Counter, Histogram, Registry } from 'prom-client';

export const registry = new Registry();

/** Few buckets: every observation walks them, and a scrape carries one series per bucket. */
const SECONDS_BUCKETS = [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30];

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

/** An agent turn ended: its provider (`builtin`, `openai`…), final status, and duration. */
export function recordTurn(provider: string, status: string, seconds: number): void {
  agentTurns.labels(provider, status).inc();
  agentTurnDuration.labels(provider).observe(seconds);
}

/** A knowledge search ran, taking `seconds`. */
export function recordKnowledgeSearch(seconds: number): void {
  knowledgeSearchDuration.observe(seconds);
}
