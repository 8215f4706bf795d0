// The settings pages' stylesheet and script, served from /admin/assets/ so that the pages' Content
// Security Policy can forbid inline code ('self' only).

export const SETTINGS_CSS = `
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--line-soft:#e6eaef;--bg:#f6f8fa;--card:#fff;--accent:#0969da;
--danger:#cf222e;--ok:#1a7f37;--warn:#9a6700;--radius:8px;
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",sans-serif;color:var(--fg)}
*{box-sizing:border-box}
body{margin:0;background:var(--bg)}
a{color:var(--accent)}
code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.muted{color:var(--muted)}
.visually-hidden{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip-path:inset(50%);
white-space:nowrap;border:0}

/* The bar at the top: the product, who is signed in, and sign-out. */
header.top{background:#1f2328;color:#fff;padding:.65rem 1.5rem;display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1rem}
header.top .brand{font-weight:600;margin-right:auto}
header.top .who{color:#d1d9e0;font-size:.875rem;min-width:0;overflow-wrap:anywhere}
header.top .who code{display:inline-block;max-width:100%;overflow-wrap:anywhere}
header.top .who code{color:#fff;font-size:.8125rem}
header.top form{margin:0}
header.top button{background:transparent;color:#fff;border-color:#59636e}
header.top button:hover{background:#32383f}

main{max-width:75rem;margin:1.75rem auto 3rem;padding:0 1.5rem}
nav.crumbs ol{list-style:none;margin:0 0 .35rem;padding:0;display:flex;flex-wrap:wrap;font-size:.875rem;color:var(--muted)}
nav.crumbs li+li::before{content:"/";padding:0 .45rem;color:var(--line)}
nav.crumbs [aria-current]{color:var(--fg)}
h1{font-size:1.6rem;line-height:1.25;margin:0 0 .35rem}
h2{font-size:1.05rem;margin:0 0 .75rem}
.page-head{margin-bottom:1.25rem}
.page-head p{margin:0;max-width:48rem}

.card{background:var(--card);border:1px solid var(--line);border-radius:var(--radius);padding:1.25rem 1.5rem;
margin-bottom:1.5rem;box-shadow:0 1px 2px rgba(31,35,40,.04)}
.narrow{max-width:26rem;margin:4rem auto}
.narrow h1{margin-bottom:.25rem}
.narrow button.primary{width:100%;padding:.5rem .85rem;font-size:.9375rem}
.card-head{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:.5rem 1rem;
padding:1rem 1.5rem;border-bottom:1px solid var(--line)}
.card-head h2{margin:0}

label{display:block;font-weight:600;margin:.9rem 0 .3rem}
input[type=text],input[type=email],input[type=password],input[type=date]{width:100%;min-width:0;padding:.45rem .65rem;
border:1px solid var(--line);border-radius:6px;font:inherit;background:#fff;color:var(--fg)}
input:focus-visible,button:focus-visible,.button:focus-visible,summary:focus-visible,a:focus-visible{
outline:2px solid var(--accent);outline-offset:2px}
fieldset{border:0;margin:.9rem 0 0;padding:0;min-width:0}
legend{font-weight:600;padding:0;margin-bottom:.3rem}

button,.button{font:inherit;font-size:.875rem;font-weight:500;line-height:1.4;border-radius:6px;border:1px solid var(--line);
background:#f6f8fa;padding:.35rem .85rem;cursor:pointer;color:var(--fg);text-decoration:none;display:inline-block;
white-space:nowrap}
button:hover,.button:hover{background:#eef1f4;border-color:#c1c9d2}
.primary,button.primary{background:var(--ok);border-color:#1a7f37;color:#fff;font-weight:600}
.primary:hover,button.primary:hover{background:#1c8139;border-color:#176f2c;color:#fff}
button.small{font-size:.8125rem;padding:.2rem .65rem}
button.danger{color:var(--danger)}
button.danger:hover{background:var(--danger);border-color:var(--danger);color:#fff}

/* The keys: a table on wide screens, a block per key on narrow ones (below). */
.keys-card{padding:0;position:relative}
.keys-card .empty{margin:0;padding:1.25rem 1.5rem}
table{border-collapse:collapse;width:100%}
#keys th,#keys td{text-align:left;padding:.75rem .6rem;border-bottom:1px solid var(--line-soft);vertical-align:top}
#keys th:first-child,#keys td:first-child{padding-left:1.5rem}
#keys th:last-child,#keys td:last-child{padding-right:1.5rem}
#keys tbody tr:last-child>*{border-bottom:0}
#keys tbody tr:hover{background:#f9fafb}
#keys thead th{font-size:.75rem;font-weight:600;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);
background:#f6f8fa;border-bottom:1px solid var(--line);white-space:nowrap}
#keys .key{width:30%;min-width:11rem;font-weight:400}
#keys td.scopes{width:27%;min-width:10.5rem}
.key-name{display:block;overflow-wrap:anywhere}
.prefix{display:block;margin-top:.15rem;color:var(--muted);overflow-wrap:anywhere}
tr.revoked .key-name{color:var(--muted)}
#keys td.when{font-size:.875rem;white-space:nowrap}
time .hour{display:block;color:var(--muted);font-size:.8125rem}
div.actions{display:flex;gap:.4rem;justify-content:flex-end}
div.actions form{margin:0}

.chips{display:flex;flex-wrap:wrap;gap:.3rem}
.chip{font:12px/1.6 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#ddf4ff;color:#0550ae;
border-radius:999px;padding:0 .55rem;max-width:100%;overflow-wrap:anywhere}
.chip.all{background:#fbefff;color:#6639ba;font-weight:600}
.all-scopes summary{cursor:pointer;list-style:none;display:flex;flex-wrap:wrap;align-items:center;gap:.4rem;
border-radius:999px;width:fit-content;max-width:100%}
.all-scopes summary::-webkit-details-marker{display:none}
.all-scopes summary::after{content:"Show list";font-size:.8125rem;color:var(--accent)}
.all-scopes[open] summary::after{content:"Hide list"}
.all-scopes .chips{margin-top:.5rem}
.badge{display:inline-flex;align-items:center;gap:.35rem;font-size:.8125rem;font-weight:600;border-radius:999px;
padding:.05rem .6rem;white-space:nowrap}
.badge::before{content:"";width:.45rem;height:.45rem;border-radius:50%;background:currentColor}
.badge.active{color:#116329;background:#dafbe1}
.badge.locked{color:#7d4e00;background:#fff8c5}
.badge.revoked,.badge.expired{color:#a40e26;background:#ffebe9}

.notice{border-radius:6px;padding:.75rem 1rem;margin-bottom:1rem;border:1px solid;overflow-wrap:anywhere}
.notice.ok{background:#dafbe1;border-color:#4ac26b}
.notice.error{background:#ffebe9;border-color:#ff8182}
.secret{background:#fff8c5;border:1px solid #d4a72c;border-radius:var(--radius);padding:1rem 1.25rem;margin-bottom:1.5rem;
overflow-wrap:anywhere}
.secret h2{margin-bottom:.4rem}
.secret p{margin:0}
.secret .row{display:flex;gap:.5rem;margin-top:.75rem}
.secret input{flex:1;min-width:0;font:14px/1.8 ui-monospace,SFMono-Regular,Menlo,monospace;padding:.3rem .6rem;
border:1px solid var(--line);border-radius:6px}

.row2{display:grid;grid-template-columns:2fr 1fr;gap:0 1.25rem}
.quick{display:flex;flex-wrap:wrap;gap:.35rem;margin-top:.4rem}
.quick button{font-size:.8125rem;padding:.1rem .6rem}
.scope-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,18rem),1fr));gap:0 1.5rem;
margin:.6rem 0 .5rem}
.scope-grid .resource{display:flex;align-items:center;gap:1rem;padding:.45rem 0;border-bottom:1px solid var(--line-soft)}
.scope-grid .resource>span{flex:1;font-weight:600;min-width:0}
.scope-grid label{display:inline-flex;align-items:center;gap:.3rem;font-weight:400;margin:0;white-space:nowrap}
.submit{margin:1.25rem 0 0}
.pager{padding:.75rem 1.5rem;border-top:1px solid var(--line-soft);text-align:right}

@media (max-width:60rem){
  /* Each key a block: name and status, scopes, the three dates side by side, the actions. */
  #keys thead{display:none}
  #keys,#keys tbody{display:block}
  #keys tr{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:.6rem .75rem;padding:1rem 1.25rem;
  border-bottom:1px solid var(--line-soft)}
  #keys tbody tr:last-child{border-bottom:0}
  #keys td,#keys th,#keys th:first-child,#keys td:last-child{display:block;padding:0;border:0;width:auto;min-width:0}
  #keys .key{grid-column:1/3;grid-row:1;width:auto;min-width:0}
  #keys td.status{grid-column:3;grid-row:1;justify-self:end}
  #keys td.scopes{grid-column:1/-1}
  #keys td.actions{grid-column:1/-1}
  #keys td[data-label]::before{content:attr(data-label);display:block;font-size:.6875rem;font-weight:600;
  text-transform:uppercase;letter-spacing:.04em;color:var(--muted);margin-bottom:.15rem}
  #keys td.when{white-space:normal;overflow-wrap:anywhere}
  div.actions{justify-content:flex-start}
  #keys tr.revoked td.actions{display:none}
}
@media (max-width:40rem){
  main{padding:0 1rem;margin-top:1.25rem}
  header.top{padding:.6rem 1rem}
  header.top .who{order:1;flex-basis:100%}
  .card{padding:1rem}
  .keys-card{padding:0}
  .card-head{padding:.9rem 1rem}
  #keys tr{padding:1rem}
  .row2{grid-template-columns:1fr}
  h1{font-size:1.4rem}
}
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
