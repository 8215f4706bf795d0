// Every public operation, area by area. A new area adds its list here.
import { appOperations } from './apps.js';
import type { Operation } from './registry.js';
import { workflowOperations } from './workflows.js';

export const OPERATIONS: Operation[] = [...appOperations, ...workflowOperations];
