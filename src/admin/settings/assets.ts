// The settings pages' stylesheet and script, served from /admin/assets/ so that the pages' Content
// Security Policy can forbid inline code ('self' only).

export const SETTINGS_CSS = `
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--card:#fff;--accent:#0969da;--danger:#cf222e;
--ok:#1a7f37;--warn:#9a6700;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg)}
*{box-sizing:border-box}
body{margin:0;background:var(--bg)}
header.top{background:#24292f;color:#fff;padding:.75rem 1.5rem;display:flex;align-items:center;gap:1rem}
header.top .brand{font-weight:600;margin-right:auto}
header.top .who{color:#d1d9e0;font-size:.9rem}
header.top form{margin:0}
header.top button{background:transparent;color:#fff;border:1px solid #57606a;padding:.25rem .75rem}
main{max-width:72rem;margin:1.5rem auto;padding:0 1.5rem}
nav.crumbs{color:var(--muted);font-size:.9rem;margin-bottom:.5rem}
h1{font-size:1.5rem;margin:.25rem 0 1rem}
h2{font-size:1.1rem;margin:0 0 .75rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1.25rem;margin-bottom:1.25rem}
.narrow{max-width:26rem;margin:4rem auto}
label{display:block;font-weight:600;margin:.75rem 0 .25rem}
input[type=text],input[type=email],input[type=password],input[type=date]{width:100%;padding:.45rem .6rem;
border:1px solid var(--line);border-radius:6px;font:inherit}
input:focus,button:focus{outline:2px solid var(--accent);outline-offset:1px}
button,.button{font:inherit;border-radius:6px;border:1px solid var(--line);background:#f6f8fa;padding:.35rem .8rem;
cursor:pointer;color:var(--fg);text-decoration:none;display:inline-block}
button.primary{background:var(--ok);border-color:#1a7f37;color:#fff;font-weight:600}
button.danger{color:var(--danger)}
button.link{border:0;background:none;color:var(--accent);padding:0}
.actions{display:flex;gap:.4rem;justify-content:flex-end}
.actions form{margin:0}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.55rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:.8rem;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace}
.scopes{display:flex;flex-wrap:wrap;gap:.25rem}
.chip{font:12px ui-monospace,monospace;background:#ddf4ff;color:#0550ae;border-radius:999px;padding:.05rem .5rem}
.badge{font-size:.8rem;font-weight:600;border-radius:999px;padding:.1rem .55rem;border:1px solid}
.badge.active{color:var(--ok);border-color:#4ac26b}
.badge.locked{color:var(--warn);border-color:#d4a72c}
.badge.revoked,.badge.expired{color:var(--danger);border-color:#ff8182}
.muted{color:var(--muted)}
.notice{border-radius:6px;padding:.75rem 1rem;margin-bottom:1rem;border:1px solid}
.notice.ok{background:#dafbe1;border-color:#4ac26b}
.notice.error{background:#ffebe9;border-color:#ff8182}
.secret{background:#fff8c5;border:1px solid #d4a72c;border-radius:8px;padding:1rem 1.25rem;margin-bottom:1.25rem}
.secret .row{display:flex;gap:.5rem;margin-top:.5rem}
.secret input{flex:1;font:14px/1.8 ui-monospace,monospace;padding:.3rem .6rem;border:1px solid var(--line);border-radius:6px}
.scope-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(17rem,1fr));gap:.25rem 1rem;margin:.25rem 0 .5rem}
.scope-grid .resource{display:flex;align-items:center;gap:.75rem;padding:.3rem 0;border-bottom:1px dashed var(--line)}
.scope-grid .resource span{flex:1;font-weight:600}
.scope-grid label{display:inline;font-weight:400;margin:0;white-space:nowrap}
td.nowrap{white-space:nowrap}
.row2{display:grid;grid-template-columns:2fr 1fr;gap:1rem}
.quick{display:flex;gap:.35rem;margin-top:.35rem}
.quick button{font-size:.8rem;padding:.1rem .5rem}
.pager{margin-top:.75rem;text-align:right}
@media (max-width:720px){.row2{grid-template-columns:1fr}td:nth-child(5),th:nth-child(5){display:none}}
`;

export const SETTINGS_JS = `
'use strict';
document.addEventListener('DOMContentLoaded', function () {
  var copy = document.getElementById('copy-secret');
  var secret = document.getElementById('new-secret');
  if (copy && secret) {
    copy.addEventListener('click', function () {
      secret.select();
      var done = function () { copy.textContent = 'Copied'; };
      if (navigator.clipboard) navigator.clipboard.writeText(secret.value).then(done, function () { document.execCommand('copy'); done(); });
      else { document.execCommand('copy'); done(); }
    });
    // The secret was shown by a form answer: leave the address bar on the page itself, so a
    // reload does not send the form again.
    var back = secret.getAttribute('data-page');
    if (back && window.history && history.replaceState) history.replaceState(null, '', back);
  }
  document.querySelectorAll('form[data-confirm]').forEach(function (form) {
    form.addEventListener('submit', function (event) {
      if (!window.confirm(form.getAttribute('data-confirm'))) event.preventDefault();
    });
  });
  // A write scope includes read access: ticking write ticks read, unticking read unticks write.
  document.querySelectorAll('input[data-write]').forEach(function (box) {
    box.addEventListener('change', function () {
      var read = document.getElementById(box.getAttribute('data-write'));
      if (box.checked && read) read.checked = true;
    });
  });
  document.querySelectorAll('input[data-read]').forEach(function (box) {
    box.addEventListener('change', function () {
      var write = document.getElementById(box.getAttribute('data-read'));
      if (!box.checked && write) write.checked = false;
    });
  });
  document.querySelectorAll('button[data-select]').forEach(function (button) {
    button.addEventListener('click', function () {
      var what = button.getAttribute('data-select');
      document.querySelectorAll('input[name=scopes]').forEach(function (box) {
        box.checked = what === 'all' || (what === 'read' && /:read$/.test(box.value));
      });
    });
  });
  var expiry = document.getElementById('expires_on');
  document.querySelectorAll('button[data-days]').forEach(function (button) {
    button.addEventListener('click', function () {
      if (!expiry) return;
      var days = Number(button.getAttribute('data-days'));
      expiry.value = days ? new Date(Date.now() + days * 86400000).toISOString().slice(0, 10) : '';
    });
  });
  document.querySelectorAll('time[datetime]').forEach(function (node) {
    var date = new Date(node.getAttribute('datetime'));
    if (!isNaN(date.getTime())) node.title = date.toLocaleString();
  });
});
`;
