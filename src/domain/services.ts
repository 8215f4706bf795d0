// The domain services, each built by its own factory from exactly what it uses.

import type { Config } from '../config.js';
import type { Db } from '../db/index.js';
import { createHeavyQueries } from '../db/index.js';
import type { JobQueue } from '../jobs/queue.js';
import type { SecretBox } from '../lib/secret-box.js';
import { createTenantService } from './accounts/tenants.js';
import { createUserService } from './accounts/users.js';
import { createAgentArea } from './agent/index.js';
import { createAnalyticsService } from './analytics/report.js';
import { createAppService } from './apps/apps.js';
import { createWorkflowService } from './apps/workflows.js';
import { createCoverageService } from './coverage/index.js';
import { createLlmJudge } from './coverage/judge.js';
import { createCustomDataSourceService } from './data/custom-data-sources.js';
import { createSmartSourceService } from './data/smart-sources.js';
import { createDocumentService } from './knowledge/documents.js';
import type { EmbeddingsError } from './knowledge/embeddings/client.js';
import { createSemanticRetrieval } from './knowledge/embeddings/index.js';
import { fusedSearchKnowledge } from './knowledge/fused-search.js';
import { createKnowledgeGapService } from './knowledge/gaps.js';
import { RELEVANT_RANK, searchKnowledge } from './knowledge/search.js';
import { createSourceService } from './knowledge/sources.js';
import { knowledgeSearchLimit, searchRunner } from './knowledge/text-search.js';
import { createSimulationService } from './simulations/index.js';
import { createTaskLinkService } from './tasks/links.js';
import { createTaskService } from './tasks/tasks.js';
import { createWebhookService } from './webhooks/endpoints.js';
import { createEventEmitter } from './webhooks/events.js';

export function createServices({
  db,
  config,
  jobs,
  secrets,
  onEmbeddingsError,
}: {
  db: Db;
  config: Config;
  jobs: JobQueue;
  secrets: SecretBox;
  /** Told when a question could not be embedded (its search is then lexical). */
  onEmbeddingsError?: (error: EmbeddingsError) => void;
}) {
  // Webhook events: every area that reports events is given this one emitter.
  const emitEvent = createEventEmitter({ jobs });
  // Full-text searches and dashboard reports share one process's slots and time limits.
  const heavy = createHeavyQueries(db, {
    maxConcurrent: config.searchMaxConcurrent,
    perTenant: Math.ceil(config.searchMaxConcurrent / 2),
  });
  const search = searchRunner(heavy, config.searchTimeoutMs);
  // The agent's retrieval (each turn, simulation runs, coverage) within the same limits.
  const knowledgeLimit = knowledgeSearchLimit(config.searchTimeoutMs);
  // Semantic retrieval when an embeddings model is configured (src/domain/knowledge/embeddings/):
  // the question is embedded before a slot is taken (within the search's time), then ranked by
  // fusion (src/domain/knowledge/fused-search.ts); without a vector, lexically.
  const semantic = createSemanticRetrieval({
    db,
    jobs,
    config,
    ...(onEmbeddingsError ? { onError: onEmbeddingsError } : {}),
  });
  const boundedSearchKnowledge = async (
    tenantId: string,
    query: string,
    options?: Parameters<typeof searchKnowledge>[3],
  ) => {
    const embedding = await semantic.embedQuestion(query, config.searchTimeoutMs);
    return heavy.run(tenantId, knowledgeLimit, (trx) =>
      embedding
        ? fusedSearchKnowledge(trx, tenantId, query, embedding, {
            ...options,
            minSimilarity: config.embeddingsMinSimilarity,
          })
        : searchKnowledge(trx, tenantId, query, options),
    );
  };
  const documents = createDocumentService({ db, search, passagesWritten: semantic.passagesWritten });
  const customDataSources = createCustomDataSourceService({
    db,
    search,
    maxSources: config.customDataSourcesMax,
  });
  // The agent area (src/domain/agent/index.ts): knowledge search and the gap queue are injected.
  const gaps = createKnowledgeGapService({ db, documents, emitEvent });
  const agentArea = createAgentArea({
    db,
    config,
    searchKnowledge: boundedSearchKnowledge,
    recordGap: (tenantId, gap) => gaps.recordGap(tenantId, gap),
    minRank: RELEVANT_RANK,
    emitEvent,
  });
  return {
    emitEvent,
    webhooks: createWebhookService({
      db,
      jobs,
      allowPrivateTargets: config.allowPrivateTargets,
      secrets,
    }),
    documents,
    semantic,
    sources: createSourceService({
      db,
      jobs,
      documents,
      allowPrivateTargets: config.allowPrivateTargets,
      autoSyncIntervalMinutes: config.autoSyncIntervalMinutes,
      emitEvent,
    }),
    knowledgeGaps: gaps,
    tenants: createTenantService({ db }),
    apps: createAppService({ db }),
    workflows: createWorkflowService({ db }),
    customDataSources,
    smartSources: createSmartSourceService({ db, dataSources: customDataSources }),
    users: createUserService({ db, emitEvent }),
    tasks: createTaskService({ db, emitEvent }),
    taskLinks: createTaskLinkService({ db, adminBaseUrl: config.adminBaseUrl, emitEvent }),
    ...agentArea,
    // Simulations play test cases through the turn engine on the job queue.
    simulations: createSimulationService({
      db,
      jobs,
      config,
      agents: agentArea.agents,
      conversations: agentArea.conversations,
      searchKnowledge: boundedSearchKnowledge,
      minRank: RELEVANT_RANK,
      emitEvent,
    }),
    // Coverage judges questions with the agent's own retrieval and threshold.
    coverage: createCoverageService({
      db,
      jobs,
      retrieve: (tenantId, question) => agentArea.agent.retrieve(tenantId, question),
      emitEvent,
      threshold: RELEVANT_RANK,
      judge:
        config.llmBaseUrl && config.llmModel
          ? createLlmJudge({
              baseUrl: config.llmBaseUrl,
              apiKey: config.llmApiKey,
              model: config.llmModel,
              timeoutMs: config.llmTimeoutMs,
            })
          : undefined,
    }),
    analytics: createAnalyticsService({ heavy, timeoutMs: config.analyticsTimeoutMs }),
  };
}

export type Services = ReturnType<typeof createServices>;
