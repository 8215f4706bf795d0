// Every public operation, area by area. A new area adds its list here.
import { agentOperations } from './agents.js';
import { analyticsOperations } from './analytics.js';
import { appOperations } from './apps.js';
import { conversationOperations } from './conversations.js';
import { coverageOperations } from './coverage.js';
import { customDataSourceOperations } from './custom-data-sources.js';
import { documentOperations } from './documents.js';
import { knowledgeGapOperations } from './knowledge-gaps.js';
import type { Operation } from './registry.js';
import { simulationOperations } from './simulations.js';
import { smartSourceOperations } from './smart-sources.js';
import { sourceOperations } from './sources.js';
import { taskOperations } from './tasks.js';
import { userOperations } from './users.js';
import { webhookOperations } from './webhooks.js';
import { workflowOperations } from './workflows.js';

export const OPERATIONS: Operation[] = [
  ...appOperations,
  ...workflowOperations,
  ...sourceOperations,
  ...documentOperations,
  ...knowledgeGapOperations,
  ...customDataSourceOperations,
  ...smartSourceOperations,
  ...agentOperations,
  ...conversationOperations,
  ...simulationOperations,
  ...taskOperations,
  ...userOperations,
  ...webhookOperations,
  ...coverageOperations,
  ...analyticsOperations,
];
