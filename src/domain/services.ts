// The domain services, each built by its own factory from exactly what it uses.
import type { Db } from '../db/client.js';
import { createAppService } from './apps.js';
import { createTenantService } from './tenants.js';
import { createWorkflowService } from './workflows.js';

export function createServices({ db }: { db: Db }) {
  return {
    tenants: createTenantService({ db }),
    apps: createAppService({ db }),
    workflows: createWorkflowService({ db }),
  };
}

export type Services = ReturnType<typeof createServices>;
