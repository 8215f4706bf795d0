// Wiring of the agent area: agents, conversations and the turn engine with its provider, built
// from the configuration and the knowledge functions the engine is given (search, gaps).
import { type Config, ConfigError } from '../../config.js';
import type { Db } from '../../db/index.js';
import { createAgentService } from '../conversations/agents.js';
import { createConversationService } from '../conversations/conversations.js';
import { createBuiltinProvider } from './builtin-provider.js';
import { type AgentEngineDeps, createAgentEngine } from './engine.js';
import { createOpenAiProvider } from './openai-provider.js';
import { createTraceReader } from './trace-store.js';
import type { TraceOptions } from './turn-trace.js';
import type { Provider } from './types.js';

type LlmConfig = Pick<Config, 'llmBaseUrl' | 'llmApiKey' | 'llmModel' | 'llmTimeoutMs'>;

/** What turn traces may hold and what provider calls cost: MODEL_PRICES, TRACE_PROMPTS, and the key never to store. */
export function traceOptions(config: LlmConfig & Pick<Config, 'modelPrices' | 'tracePrompts'>): TraceOptions {
  return {
    prices: config.modelPrices,
    storePrompts: config.tracePrompts,
    secrets: config.llmApiKey ? [config.llmApiKey] : [],
  };
}

/** `openai` when LLM_BASE_URL is set (LLM_MODEL is then required), else `builtin`. */
export function createProvider(config: LlmConfig): Provider {
  if (!config.llmBaseUrl) return createBuiltinProvider();
  if (!config.llmModel) throw new ConfigError('LLM_MODEL is required when LLM_BASE_URL is set');
  return createOpenAiProvider({
    baseUrl: config.llmBaseUrl,
    apiKey: config.llmApiKey,
    model: config.llmModel,
    timeoutMs: config.llmTimeoutMs,
  });
}

export interface AgentAreaDeps {
  db: Db;
  config: LlmConfig &
    Pick<
      Config,
      | 'clientFunctionTimeoutMs'
      | 'sseHeartbeatMs'
      | 'turnMaxStreamsPerTenant'
      | 'turnMaxWaitingPerTenant'
      | 'modelPrices'
      | 'tracePrompts'
    >;
  searchKnowledge: AgentEngineDeps['searchKnowledge'];
  recordGap: AgentEngineDeps['recordGap'];
  minRank?: number;
  emitEvent?: AgentEngineDeps['emitEvent'];
}

export function createAgentArea({ db, config, searchKnowledge, recordGap, minRank, emitEvent }: AgentAreaDeps) {
  const agents = createAgentService({ db });
  const conversations = createConversationService({ db });
  const engine = createAgentEngine({
    db,
    provider: createProvider(config),
    agents,
    conversations,
    searchKnowledge,
    recordGap,
    clientFunctionTimeoutMs: config.clientFunctionTimeoutMs,
    maxStreamsPerTenant: config.turnMaxStreamsPerTenant,
    maxWaitingPerTenant: config.turnMaxWaitingPerTenant,
    trace: traceOptions(config),
    ...(minRank !== undefined ? { minRank } : {}),
    ...(emitEvent ? { emitEvent } : {}),
  });
  return {
    agents,
    conversations,
    traces: createTraceReader({ db }),
    agent: Object.assign(engine, { sseHeartbeatMs: config.sseHeartbeatMs }),
  };
}
