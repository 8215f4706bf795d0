// The scope catalogue (DESIGN.md §3): `<resource>:read` and `<resource>:write`, write implies read.
// It is fixed; a key asking for a scope outside it is refused.

export const SCOPE_RESOURCES = [
  'apps',
  'knowledge',
  'tasks',
  'simulations',
  'coverage',
  'workflows',
  'analytics',
  'accounts',
  'agents',
  'conversations',
  'webhooks',
] as const;

export type ScopeResource = (typeof SCOPE_RESOURCES)[number];
export type Scope = `${ScopeResource}:${'read' | 'write'}`;

export const ALL_SCOPES: Scope[] = SCOPE_RESOURCES.flatMap((r) => [`${r}:read`, `${r}:write`] as Scope[]);

export function isScope(value: string): value is Scope {
  return (ALL_SCOPES as string[]).includes(value);
}

/** Whether `granted` allows `required`: the scope itself, or the write scope of its resource. */
export function allows(granted: readonly string[], required: Scope): boolean {
  if (granted.includes(required)) return true;
  const [resource, access] = required.split(':');
  return access === 'read' && granted.includes(`${resource}:write`);
}
