// The error catalogue as a page (/docs/errors), where every error's `doc_url` points: each code
// with its status and type, when it is answered (src/operations/errors.ts) and how to fix it
// (src/http/error-fixes.ts). Code spans of the texts (`param`) are shown as code.

import { ERROR_CATALOGUE } from '../operations/errors.js';
import { ERROR_FIXES } from './error-fixes.js';

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

/** Text as HTML: escaped, its `code spans` as <code>; a lone backtick stays as it is. */
export function inlineHtml(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

export function errorCataloguePage(): string {
  const rows = Object.entries(ERROR_CATALOGUE)
    .map(
      ([code, e]) =>
        `<tr id="${code}"><td><a href="#${code}"><code>${code}</code></a></td><td>${e.status}</td>` +
        `<td><code>${e.type}</code></td><td>${inlineHtml(e.condition)}</td>` +
        `<td>${inlineHtml(ERROR_FIXES[code as keyof typeof ERROR_FIXES])}</td></tr>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Workspace API — errors</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#1f2328}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d0d7de;padding:.5rem;text-align:left;vertical-align:top}
tr:target{background:#fff8c5}code{font-size:90%;background:#f6f8fa;padding:.1em .3em;border-radius:4px}
td:first-child code{white-space:nowrap}</style></head>
<body><p><a href="/docs">← API reference</a></p><h1>Errors</h1>
<p>Every error answers <code>{"error": {type, code, message, param, doc_url, event_id}}</code>.
<code>param</code> names the parameter at fault as a path (<code>files[3].path</code>);
<code>event_id</code> comes with <code>internal_error</code> and names the server log entry.
Every answer carries <code>X-Request-Id</code>, the id the server logged the request under.</p>
<table><thead><tr><th>code</th><th>status</th><th>type</th><th>when</th><th>how to fix it</th></tr></thead><tbody>
${rows}
</tbody></table></body></html>`;
}
