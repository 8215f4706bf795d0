// The catalogue of roles and permissions a staff user can hold, and the checks every value
// written passes. Admin is never among them: "The API can never grant Admin status to a user"
// (spec: Authentication 7). That rule lives here once, so every path that writes a role or a
// permission (POST /users, POST /users/{id}/permissions, and the MCP tools built from the same
// operations) refuses it; the database repeats it in check constraints (migration 0005).
import { ValidationError } from '../errors.js';

/** Roles a user can hold. A role is a label for people; what a user may do is its permissions. */
export const ROLES = {
  agent: 'Answers conversations and works on tasks. The default for a new user.',
  supervisor: 'Oversees agents: reassigns conversations, reviews knowledge and analytics.',
  viewer: 'Reads conversations, knowledge and analytics without changing them.',
} as const;

export type Role = keyof typeof ROLES;
export const DEFAULT_ROLE: Role = 'agent';

/** Permissions a user can be granted. There is deliberately no Admin permission. */
export const PERMISSIONS = {
  'conversations.view': 'Read conversations and their messages.',
  'conversations.reply': 'Reply to customers in conversations.',
  'conversations.assign': 'Assign conversations to agents and teams.',
  'tickets.manage': 'Handle, reassign and close handoff tickets.',
  'knowledge.view': 'Read sources, documents and knowledge update requests.',
  'knowledge.edit': 'Edit documents and review knowledge update requests.',
  'tasks.view': 'Read tasks, their comments and links.',
  'tasks.manage': 'Create tasks, comment on them and link them.',
  'analytics.view': 'Read dashboards and reports.',
  'simulations.run': 'Create simulation datasets and start runs.',
  'workflows.manage': 'Create workflows and enable or disable them.',
  'agents.manage': 'Configure agents and their handoffs.',
} as const;

export type PermissionName = keyof typeof PERMISSIONS;

/**
 * Whether a value spells Admin in any way: any casing, surrounding or inner whitespace,
 * separators (`ad-min`, `workspace.admin`), full-width or other compatibility forms, invisible
 * characters. Such values get a message saying why; anything else outside the catalogue is refused
 * as unknown, so a look-alike that escapes this test is refused all the same.
 */
export function spellsAdmin(value: string): boolean {
  return value
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^a-z]/g, '')
    .includes('admin');
}

const ADMIN_REFUSED = 'The API can never grant Admin status; Admin is managed in the admin console only.';

/** The catalogue role a value names (case and surrounding whitespace ignored), or a `validation_error`. */
export function checkRole(value: string, param = 'role'): Role {
  if (spellsAdmin(value)) throw new ValidationError(param, `${param}: ${ADMIN_REFUSED}`);
  const role = value.trim().toLowerCase();
  if (!Object.hasOwn(ROLES, role)) {
    throw new ValidationError(param, `${param} must be one of: ${Object.keys(ROLES).join(', ')}.`);
  }
  return role as Role;
}

/** The catalogue permissions a list names, without repeats, or a `validation_error` naming the item. */
export function checkPermissions(values: readonly string[], param = 'permissions'): PermissionName[] {
  const names = new Set<PermissionName>();
  values.forEach((value, i) => {
    const at = `${param}[${i}]`;
    if (spellsAdmin(value)) throw new ValidationError(at, `${at}: ${ADMIN_REFUSED}`);
    const name = value.trim().toLowerCase();
    if (!Object.hasOwn(PERMISSIONS, name)) {
      throw new ValidationError(at, `${at} is not a known permission; see the permission catalogue.`);
    }
    names.add(name as PermissionName);
  });
  return [...names];
}
