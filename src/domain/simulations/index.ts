// The simulations area (DESIGN.md §7, docs/simulations.md): personas, datasets and test cases,
// import from conversations, and runs played on the job queue.
//
// Runs play cases through the turn engine customers get (`createAgentEngine`, with the provider
// the configuration selects, the same knowledge search and rank threshold). It differs in two
// ways: its knowledge-gap sink, where a simulated "don't know" is reported to the runner (it is
// how a `no_answer` case is recognised) instead of being queued as a knowledge gap for the team;
// and it may continue the conversations simulations play, marked in `simulation_conversations`,
// which every read for clients leaves out (`isCustomerConversation`, ../conversations.ts).

import type { Config } from '../../config.js';
import type { Db } from '../../db/index.js';
import type { JobQueue } from '../../jobs/queue.js';
import { type AgentEngineDeps, createAgentEngine } from '../agent/engine.js';
import { createProvider, traceOptions } from '../agent/index.js';
import type { AgentService } from '../conversations/agents.js';
import type { ConversationService } from '../conversations/conversations.js';
import type { EmitEvent } from '../webhooks/events.js';
import { createDataset, deleteDataset, getDataset, listDatasets } from './datasets.js';
import { createDeclinedTracker } from './declined.js';
import { importConversation } from './import.js';
import { createLlmJudge } from './judge.js';
import { createPersona, listPersonas } from './personas.js';
import { createRunService } from './runs.js';
import { createTestCase, deleteTestCase, listTestCases } from './test-cases.js';

export { SIMULATION_RUN_JOB } from './runs.js';

export interface SimulationDeps {
  db: Db;
  jobs: JobQueue;
  config: Pick<
    Config,
    | 'llmBaseUrl'
    | 'llmApiKey'
    | 'llmModel'
    | 'llmTimeoutMs'
    | 'clientFunctionTimeoutMs'
    | 'simulationConcurrency'
    | 'modelPrices'
    | 'tracePrompts'
  >;
  agents: AgentService;
  conversations: ConversationService;
  searchKnowledge: AgentEngineDeps['searchKnowledge'];
  minRank?: number | undefined;
  /** Webhook events: `simulation.run.completed`. */
  emitEvent?: EmitEvent | undefined;
}

export function createSimulationService(deps: SimulationDeps) {
  const { db, config } = deps;
  /** A function of the area's modules with this service's database. */
  const withDb =
    <A extends unknown[], R>(fn: (db: Db, ...args: A) => R) =>
    (...args: A) =>
      fn(db, ...args);
  const declined = createDeclinedTracker();
  const engineDeps: AgentEngineDeps = {
    db,
    provider: createProvider(config),
    agents: deps.agents,
    conversations: deps.conversations,
    searchKnowledge: deps.searchKnowledge,
    recordGap: async (_tenantId, gap) => declined.record(gap.message_id),
    clientFunctionTimeoutMs: config.clientFunctionTimeoutMs,
    // Its runs continue the conversations they play, which other engines treat as absent.
    playsSimulations: true,
    trace: traceOptions(config),
    ...(deps.minRank !== undefined ? { minRank: deps.minRank } : {}),
  };
  const judge =
    config.llmBaseUrl && config.llmModel
      ? createLlmJudge({
          baseUrl: config.llmBaseUrl,
          apiKey: config.llmApiKey,
          model: config.llmModel,
          timeoutMs: config.llmTimeoutMs,
        })
      : undefined;
  const runs = createRunService({
    db,
    jobs: deps.jobs,
    agents: deps.agents,
    // One engine per run job: closing it stops that job's turns only (see ./runs.ts).
    newEngine: () => createAgentEngine(engineDeps),
    declined,
    judge,
    concurrency: config.simulationConcurrency,
    emitEvent: deps.emitEvent,
  });

  return {
    createPersona: withDb(createPersona),
    listPersonas: withDb(listPersonas),
    createDataset: withDb(createDataset),
    listDatasets: withDb(listDatasets),
    getDataset: withDb(getDataset),
    deleteDataset: withDb(deleteDataset),
    createTestCase: withDb(createTestCase),
    listTestCases: withDb(listTestCases),
    deleteTestCase: withDb(deleteTestCase),
    /** Builds a test case from a conversation and adds it to the dataset. */
    importConversation: withDb(importConversation),

    createRun: runs.createRun,
    getRun: runs.getRun,
    listRuns: runs.listRuns,
    listResults: runs.listResults,
    /** The run job's handler, for a queue other than the app's (tests, tools). */
    runJob: runs.runJob,
    /** Stops the run jobs playing in this process: their turns end, their cases play later. */
    close: runs.close,
  };
}

export type SimulationService = ReturnType<typeof createSimulationService>;
