// aisp dashboard: shared helpers (token, API calls, errors), the login and home pages.
'use strict';

class ApiError extends Error {
  constructor(err, status) {
    super((err && err.message) || 'request failed');
    this.kind = (err && err.kind) || 'internal';
    this.hint = (err && err.hint) || '';
    this.status = status || 0;
  }
}

const aisp = (() => {
  const KEY = 'aisp.token';
  const token = () => sessionStorage.getItem(KEY) || '';
  const setToken = (t) => (t ? sessionStorage.setItem(KEY, t) : sessionStorage.removeItem(KEY));
  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h.Authorization = 'Bearer ' + t;
    return h;
  }
  function toLogin() {
    const next = location.pathname + location.search + location.hash;
    location.replace('/login?next=' + encodeURIComponent(next));
  }
  // One request with the token; a 401 sends the user to the login page.
  async function request(method, url, body, opts) {
    const init = { method, headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}) };
    if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
    if (opts && opts.signal) init.signal = opts.signal;
    if (opts && opts.raw) { init.body = opts.raw; init.headers = headers({ 'Content-Type': 'application/octet-stream' }); }
    const r = await fetch(url, init);
    if (r.status === 401) {
      toLogin();
      throw new ApiError({ kind: 'unauthorized', message: 'this server needs its token', hint: 'Sign in.' }, 401);
    }
    return r;
  }
  async function json(method, url, body, opts) {
    const r = await request(method, url, body, opts);
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (!r.ok) throw new ApiError((data && data.error) || { kind: 'internal', message: 'HTTP ' + r.status }, r.status);
    return data;
  }
  const post = (url, body, opts) => json('POST', url, body === undefined ? {} : body, opts);
  const get = (url, opts) => json('GET', url, undefined, opts);
  async function html(url, opts) {
    const r = await request('GET', url, undefined, opts);
    return r.text();
  }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  // An error as every page shows it: kind, message, hint.
  function errorBox(err) {
    const box = el('div', { class: 'error', 'data-kind': err.kind || 'internal' },
      el('span', { class: 'kind', text: err.kind || 'internal' }), ' ' + (err.message || String(err)));
    if (err.hint) box.append(el('div', { class: 'hint', text: err.hint }));
    return box;
  }
  function fmtNs(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(2) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
    return Math.round(ns) + ' ns';
  }
  // Call one tool by its name: its HTTP path comes from the registry (GET /api/tools/<tool>).
  const paths = new Map();
  async function tool(name, args, opts) {
    if (!paths.has(name)) paths.set(name, (await get('/api/tools/' + encodeURIComponent(name))).path);
    return post(paths.get(name), args || {}, opts);
  }
  // One server-rendered part of a page (POST /dashboard/view/<name>): a progress line with the
  // elapsed time and a Cancel button while it runs (Cancel aborts the request; the server cancels
  // the call), then the HTML, or the error box (kind, message, hint). Resolves true on success.
  async function view(name, args, slot, opts) {
    const ctl = new AbortController();
    const started = performance.now();
    const label = (opts && opts.label) || 'working';
    const text = el('span', { class: 'small', text: label + '…' });
    const cancel = el('button', { type: 'button', class: 'cancel', text: 'Cancel', onclick: () => ctl.abort() });
    const prog = el('div', { class: 'view-progress', 'data-state': 'running' }, el('progress'), ' ', text, ' ', cancel);
    slot.dataset.state = 'running';
    slot.replaceChildren(prog);
    const timer = setInterval(() => { text.textContent = `${label}… ${((performance.now() - started) / 1000).toFixed(0)} s`; }, 500);
    try {
      const r = await request('POST', '/dashboard/view/' + name, args || {}, { signal: ctl.signal });
      const body = await r.text();
      slot.innerHTML = body; // rendered and escaped on the server
      slot.dataset.state = r.ok ? 'done' : 'error';
      return r.ok;
    } catch (e) {
      const err = e.name === 'AbortError'
        ? { kind: 'cancelled', message: label + ' was cancelled', hint: 'Run it again when you are ready.' }
        : e;
      if (e.status !== 401) slot.replaceChildren(errorBox(err));
      slot.dataset.state = e.name === 'AbortError' ? 'cancelled' : 'error';
      return false;
    } finally {
      clearInterval(timer);
    }
  }
  return { token, setToken, request, json, post, get, html, el, errorBox, fmtNs, toLogin, tool, view };
})();

function showAuth() {
  const slot = document.getElementById('auth');
  if (!slot || !aisp.token()) return;
  slot.append('token set · ', aisp.el('button', {
    type: 'button', text: 'sign out',
    onclick: () => { aisp.setToken(''); location.href = '/login'; },
  }));
}

function markNav() {
  const page = document.body.dataset.page;
  const key = page === 'tool' ? 'tools' : page;
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', a.dataset.nav === key));
}

function loginPage() {
  const form = document.getElementById('login-form');
  const input = document.getElementById('token-input');
  const out = document.getElementById('login-error');
  const next = new URLSearchParams(location.search).get('next') || '/';
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    out.textContent = '';
    const t = input.value.trim();
    // Checked before it is kept: a wrong token stays out of storage.
    const r = await fetch('/api/tools', { headers: { Authorization: 'Bearer ' + t } });
    if (r.status === 401) {
      out.append(aisp.errorBox({ kind: 'unauthorized', message: 'the server refused this token', hint: 'Use the token aisp was started with (AISP_TOKEN or --token).' }));
      return;
    }
    aisp.setToken(t);
    location.href = localNext(next);
  });
}

// Where to go after sign-in: a path on this server only. `//host`, `/\host`
// (browsers read a backslash as a slash), tabs and line breaks (which they
// drop) and anything that resolves to another origin go to the home page.
// The server applies the same rule (`/login?next=` outside it redirects to /login).
function localNext(next) {
  if (typeof next !== 'string' || !/^\/(?![\/\\])/.test(next) || /[\\\u0000-\u001f\u007f]/.test(next)) return '/';
  try {
    const u = new URL(next, location.origin);
    return u.origin === location.origin ? u.pathname + u.search + u.hash : '/';
  } catch (e) {
    return '/';
  }
}

async function homePage() {
  try {
    const tools = await aisp.get('/api/tools');
    document.getElementById('tool-count').textContent =
      tools.tools.length + ' operations, each as a form generated from its input schema.';
  } catch (e) { if (e.status !== 401) document.getElementById('tool-count').replaceChildren(aisp.errorBox(e)); return; }
  const slot = document.getElementById('captures');
  try {
    const list = await aisp.post('/api/profile/list', {});
    renderCaptures(slot, list);
  } catch (e) { slot.replaceChildren(aisp.errorBox(e)); }
}

function captureTarget(c) {
  const a = c.artifacts || {};
  return a.sqlite || a.nsys_rep || null;
}

function renderCaptures(slot, list) {
  const caps = (list.captures || []).filter((c) => c.kind === 'nsys' || captureTarget(c));
  if (!caps.length) {
    slot.replaceChildren(aisp.el('p', { class: 'muted', text: 'No captures yet in ' + list.runs_dir + ' (aisp_profile_nsys records them there).' }));
    return;
  }
  const table = aisp.el('table', { class: 'grid' });
  table.append(aisp.el('tr', {}, aisp.el('th', { text: 'run' }), aisp.el('th', { text: 'command' }),
    aisp.el('th', { text: 'state' }), aisp.el('th', { text: 'started' }), aisp.el('th', { text: 'top finding' })));
  for (const c of caps) {
    const target = captureTarget(c) ? c.run_id : null;
    const run = target ? aisp.el('a', { href: '/profiles?path=' + encodeURIComponent(target), text: c.run_id }) : c.run_id;
    table.append(aisp.el('tr', {}, aisp.el('td', {}, run), aisp.el('td', {}, aisp.el('code', { text: (c.command || []).join(' ') })),
      aisp.el('td', { text: c.state }), aisp.el('td', { text: c.created_at || '' }), aisp.el('td', { text: (c.findings || [])[0] || '' })));
  }
  slot.replaceChildren(table);
}

document.addEventListener('DOMContentLoaded', () => {
  markNav();
  showAuth();
  const page = document.body.dataset.page;
  if (page === 'login') loginPage();
  if (page === 'home') homePage();
});
