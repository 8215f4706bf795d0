// Every public operation, area by area. A new area adds its list here.

import { userOperations } from './accounts/users.js';
import { analyticsOperations } from './analytics/analytics.js';
import { appOperations } from './apps/apps.js';
import { workflowOperations } from './apps/workflows.js';
import { agentOperations } from './conversations/agents.js';
import { conversationOperations } from './conversations/conversations.js';
import { coverageOperations } from './coverage/coverage.js';
import { customDataSourceOperations } from './data/custom-data-sources.js';
import { smartSourceOperations } from './data/smart-sources.js';
import { documentOperations } from './knowledge/documents.js';
import { knowledgeGapOperations } from './knowledge/gaps.js';
import { sourceOperations } from './knowledge/sources.js';
import type { Operation } from './registry.js';
import { simulationOperations } from './simulations/simulations.js';
import { taskOperations } from './tasks/tasks.js';
import { webhookOperations } from './webhooks/webhooks.js';

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
