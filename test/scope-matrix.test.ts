// The scope matrix (spec: Authentication rules 3–4): every operation of the registry refuses a key
// without its scope with 403 insufficient_scope, a read scope never allows a write, and the
// operation's own scope (or its resource's write scope) lets the request through.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../src/domain/scopes.js';
import { OPERATIONS } from '../src/operations/index.js';
import { expectError, startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let tenantId: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ tenantId } = await t.tenant(['apps:read']));
});
afterAll(() => t.close());

const DUMMY_ID = '00000000-0000-7000-8000-000000000000';
const urlOf = (path: string) => path.replace(/:([A-Za-z_]+)/g, () => DUMMY_ID);

describe('scope matrix', () => {
  it('every operation refuses a key holding every scope but its resource’s', async () => {
    const keys = new Map<string, string>();
    for (const op of OPERATIONS) {
      const resource = op.scope.split(':')[0] as string;
      let k = keys.get(resource);
      if (!k) {
        k = await t.key(
          tenantId,
          ALL_SCOPES.filter((s) => !s.startsWith(`${resource}:`)),
        );
        keys.set(resource, k);
      }
      const r = await t.call({ method: op.method, url: urlOf(op.path), key: k, body: {} });
      expectError(r, 403, 'insufficient_scope');
      expect(r.body.error.message).toContain(op.scope);
    }
  });

  it('every write operation refuses a key with only the read scope of its resource', async () => {
    for (const op of OPERATIONS.filter((o) => o.scope.endsWith(':write'))) {
      const k = await t.key(tenantId, [op.scope.replace(':write', ':read')]);
      expectError(
        await t.call({ method: op.method, url: urlOf(op.path), key: k, body: {} }),
        403,
        'insufficient_scope',
      );
    }
  });

  it('the operation’s own scope gets past the scope check', async () => {
    for (const op of OPERATIONS) {
      const k = await t.key(tenantId, [op.scope]);
      const r = await t.call({ method: op.method, url: urlOf(op.path), key: k, body: {} });
      expect(r.status, `${op.id}: ${r.text.slice(0, 200)}`).not.toBe(403);
      expect(r.status, `${op.id}: ${r.text.slice(0, 200)}`).not.toBe(401);
    }
  });
});
