// Server-rendered HTML of the owners' settings pages. Every value from the database or the request
// goes through `escapeHtml`; the pages load their CSS and script from /admin/assets/.
import { ALL_SCOPES } from '../domain/accounts/scopes.js';
import type { ApiKeyRecord } from '../domain/accounts/tenants.js';

export const SETTINGS_PATH = '/admin/settings/integrations/api';
export const LOGIN_PATH = '/admin/login';

export function escapeHtml(value: string): string {
  return value.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

const h = escapeHtml;

interface Layout {
  title: string;
  body: string;
  signedIn?: { email: string; tenantId: string; csrf: string };
}

export function layout({ title, body, signedIn }: Layout): string {
  const top = signedIn
    ? `<span class="who">${h(signedIn.email)} · workspace <code>${h(signedIn.tenantId)}</code></span>
<form method="post" action="/admin/logout"><input type="hidden" name="_csrf" value="${h(signedIn.csrf)}">
<button type="submit">Sign out</button></form>`
    : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${h(title)} — Workspace settings</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="/admin/assets/settings.css"><script src="/admin/assets/settings.js" defer></script>
</head><body>
<header class="top"><span class="brand">Workspace settings</span>${top}</header>
<main>${body}</main>
</body></html>`;
}

export function loginPage(input: {
  csrf: string;
  tenantId?: string | undefined;
  email?: string | undefined;
  error?: string | undefined;
  tenantFixed?: boolean;
}): string {
  const error = input.error ? `<div class="notice error" role="alert">${h(input.error)}</div>` : '';
  const tenantField = input.tenantFixed
    ? `<input type="hidden" name="tenant_id" value="${h(input.tenantId ?? '')}">
<p class="muted">Workspace <code>${h(input.tenantId ?? '')}</code></p>`
    : `<label for="tenant_id">Workspace id</label>
<input type="text" id="tenant_id" name="tenant_id" required autocomplete="organization" value="${h(input.tenantId ?? '')}">`;
  return layout({
    title: 'Sign in',
    body: `<div class="card narrow"><h1>Sign in</h1>
<p class="muted">Workspace owners manage the API keys of their workspace here.</p>
${error}
<form method="post" action="${LOGIN_PATH}">
<input type="hidden" name="_csrf" value="${h(input.csrf)}">
${tenantField}
<label for="email">E-mail</label>
<input type="email" id="email" name="email" required autocomplete="username" value="${h(input.email ?? '')}">
<label for="password">Password</label>
<input type="password" id="password" name="password" required autocomplete="current-password">
<p><button type="submit" class="primary">Sign in</button></p>
</form></div>`,
  });
}

/** A time as its UTC date and, on a line of its own where space is short, its hour. */
function when(value: string | null, empty: string): string {
  if (!value) return `<span class="muted">${h(empty)}</span>`;
  return `<time datetime="${h(value)}"><span class="day">${h(value.slice(0, 10))}</span> <span class="hour">${h(
    value.slice(11, 16),
  )} UTC</span></time>`;
}

/**
 * A key's scopes as chips; a key holding every scope shows one "all scopes" badge instead, whose
 * full list is in its tooltip and opens below it.
 */
function scopeChips(scopes: readonly string[]): string {
  if (!scopes.length) return '<span class="muted">none</span>';
  const chips = `<div class="chips">${scopes.map((s) => `<span class="chip">${h(s)}</span>`).join('')}</div>`;
  if (!ALL_SCOPES.every((scope) => scopes.includes(scope))) return chips;
  return `<details class="all-scopes"><summary title="All scopes: ${h(scopes.join(', '))}"><span class="chip all">all scopes</span></summary>
${chips}</details>`;
}

function keyRow(key: ApiKeyRecord, csrf: string): string {
  const action = (name: 'revoke' | 'lock' | 'unlock', label: string, cls = '', confirm?: string) =>
    `<form method="post" action="${SETTINGS_PATH}/keys/${h(key.id)}/${name}"${
      confirm ? ` data-confirm="${h(confirm)}"` : ''
    }><input type="hidden" name="_csrf" value="${h(csrf)}"><button type="submit" class="small ${cls}" data-action="${name}" aria-label="${label} ${h(key.name)}">${label}</button></form>`;
  const actions =
    key.status === 'revoked'
      ? '<span class="muted" aria-label="No actions: the key is revoked">—</span>'
      : [
          key.status === 'locked' ? action('unlock', 'Unlock') : action('lock', 'Lock'),
          action(
            'revoke',
            'Revoke',
            'danger',
            `Revoke the key "${key.name}"? Programs using it stop working at once; this cannot be undone.`,
          ),
        ].join('');
  return `<tr data-key-id="${h(key.id)}" class="${h(key.status)}">
<th scope="row" class="key"><strong class="key-name">${h(key.name)}</strong><code class="prefix">${h(key.prefix)}…</code></th>
<td class="scopes" data-label="Scopes">${scopeChips(key.scopes)}</td>
<td class="status"><span class="badge ${h(key.status)}" data-status="${h(key.status)}">${h(key.status)}</span></td>
<td class="when last-used" data-label="Last used">${when(key.last_used_at, 'never')}</td>
<td class="when expires" data-label="Expires">${when(key.expires_at, 'never')}</td>
<td class="when created" data-label="Created">${when(key.created_at, '')}</td>
<td class="actions"><div class="actions">${actions}</div></td>
</tr>`;
}

export interface KeysPageInput {
  email: string;
  tenantId: string;
  csrf: string;
  keys: ApiKeyRecord[];
  nextCursor: string | null;
  resources: readonly string[];
  notice?: string | undefined;
  error?: string | undefined;
  created?: (ApiKeyRecord & { secret: string }) | undefined;
  form?: { name?: string; scopes?: string[]; expires_on?: string } | undefined;
}

export function keysPage(input: KeysPageInput): string {
  const form = input.form ?? {};
  const chosen = new Set(form.scopes ?? []);
  const created = input.created
    ? `<section class="secret" aria-live="polite"><h2>Key “${h(input.created.name)}” created</h2>
<p>Copy the key now and keep it somewhere safe: <strong>it is not shown again</strong>. Send it in the
<code>X-API-Key</code> header.</p>
<div class="row"><input id="new-secret" type="text" readonly value="${h(input.created.secret)}" aria-label="New API key" data-page="${SETTINGS_PATH}">
<button type="button" id="copy-secret">Copy</button></div></section>`
    : '';
  const notice = input.notice ? `<div class="notice ok" role="status">${h(input.notice)}</div>` : '';
  const error = input.error ? `<div class="notice error" role="alert">${h(input.error)}</div>` : '';
  const rows = input.keys.map((key) => keyRow(key, input.csrf)).join('\n');
  // On narrow screens the stylesheet lays each row out as a block of its own; the columns' names
  // then come from data-label.
  const table = input.keys.length
    ? `<table id="keys"><thead><tr><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col">Status</th>
<th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Created</th>
<th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead><tbody>
${rows}
</tbody></table>`
    : '<p class="muted empty" id="keys-empty">This workspace has no API keys yet.</p>';
  const pager = input.nextCursor
    ? `<div class="pager"><a class="button" href="${SETTINGS_PATH}?cursor=${encodeURIComponent(input.nextCursor)}">Older keys →</a></div>`
    : '';
  const scopeRows = input.resources
    .map((resource) => {
      const read = `${resource}:read`;
      const write = `${resource}:write`;
      const id = (scope: string) => `scope-${scope.replace(':', '-')}`;
      // Each box's label names its resource too, for screen readers ("apps read").
      const hidden = `<span class="visually-hidden">${h(resource)} </span>`;
      return `<div class="resource"><span aria-hidden="true">${h(resource)}</span>
<label><input type="checkbox" name="scopes" value="${h(read)}" id="${id(read)}" data-read="${id(write)}"${
        chosen.has(read) ? ' checked' : ''
      }> ${hidden}read</label>
<label><input type="checkbox" name="scopes" value="${h(write)}" id="${id(write)}" data-write="${id(read)}"${
        chosen.has(write) ? ' checked' : ''
      }> ${hidden}write</label></div>`;
    })
    .join('\n');
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);

  return layout({
    title: 'API keys',
    signedIn: { email: input.email, tenantId: input.tenantId, csrf: input.csrf },
    body: `<nav class="crumbs" aria-label="Breadcrumb"><ol><li>Settings</li><li>Integrations</li><li aria-current="page">API</li></ol></nav>
<div class="page-head"><h1>API keys</h1>
<p class="muted">Programs call the Workspace API with a key of this workspace, sent in the <code>X-API-Key</code> header. A key can do what its scopes allow, and nothing else.</p></div>
${created}${notice}${error}
<section class="card keys-card" aria-labelledby="keys-title"><div class="card-head"><h2 id="keys-title">Keys of this workspace</h2>
<a class="button primary" href="#create-key">New key</a></div>
${table}${pager}</section>
<section class="card" aria-labelledby="create-title"><h2 id="create-title">Create a key</h2>
<form method="post" action="${SETTINGS_PATH}/keys" id="create-key">
<input type="hidden" name="_csrf" value="${h(input.csrf)}">
<div class="row2"><div><label for="name">Name</label>
<input type="text" id="name" name="name" required maxlength="200" placeholder="e.g. CI pipeline" value="${h(form.name ?? '')}"></div>
<div><label for="expires_on">Expires on (end of day, UTC)</label>
<input type="date" id="expires_on" name="expires_on" min="${tomorrow}" value="${h(form.expires_on ?? '')}">
<div class="quick" role="group" aria-label="Expiry presets"><button type="button" data-days="30">30 days</button><button type="button" data-days="90">90 days</button>
<button type="button" data-days="365">1 year</button><button type="button" data-days="0">Never</button></div></div></div>
<fieldset class="scopes-field"><legend>Scopes <span class="muted">(write includes read)</span></legend>
<div class="quick" role="group" aria-label="Select scopes"><button type="button" data-select="read">All read</button><button type="button" data-select="all">All</button>
<button type="button" data-select="none">None</button></div>
<div class="scope-grid">${scopeRows}</div></fieldset>
<p class="submit"><button type="submit" class="primary">Create key</button></p>
</form></section>`,
  });
}

export function errorPage(status: number, message: string): string {
  return layout({
    title: `Error ${status}`,
    body: `<div class="card narrow"><h1>${status === 403 ? 'Request refused' : 'Something went wrong'}</h1>
<div class="notice error" role="alert">${h(message)}</div>
<p><a class="button" href="${SETTINGS_PATH}">Back to the settings</a></p></div>`,
  });
}
