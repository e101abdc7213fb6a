// aisp dashboard: the profile page. Sections are HTML rendered by the server
// from the profile operations; the timeline is drawn here (timeline.js).
'use strict';

const profilePage = {
  params: new URLSearchParams(location.search),
  timeline: null,
  pending: 0,

  async start() {
    const path = this.params.get('path');
    this.loadCaptures();
    this.bindUpload();
    if (!path) return;
    document.getElementById('path-input').value = path;
    document.getElementById('no-profile').hidden = true;
    document.getElementById('profile').hidden = false;
    document.getElementById('profile-title').textContent = path;
    document.title = path.split('/').pop() + ' · aisp';
    const scope = { path };
    for (const k of ['device', 'process']) {
      const v = this.params.get(k);
      if (v !== null && v !== '') scope[k] = Number(v);
    }
    this.scope = scope;
    const q = new URLSearchParams(scope).toString();
    // A set of exports (a folder or a glob): the server answers the cross-rank view (empty for one export),
    // and the single-export sections and the timeline do not apply to it.
    if (await this.loadRankSet(q)) return;
    const sections = document.querySelectorAll('.section[data-section]');
    this.pending = sections.length + 1;
    sections.forEach((el) => this.loadSection(el, q));
    this.startTimeline(scope);
    document.addEventListener('click', (ev) => {
      const a = ev.target.closest('a.to-timeline');
      if (!a) return;
      ev.preventDefault();
      this.showOnTimeline(Number(a.dataset.start), Number(a.dataset.end));
    });
    document.getElementById('perfetto-btn').addEventListener('click', () => this.perfetto());
  },

  done() {
    this.pending -= 1;
    if (this.pending === 0) {
      this.focusFinding();
      window.aispReady = performance.now();
      document.body.dataset.ready = '1';
    }
  },

  // ?finding=<rule id> (links from ask's citations): show that finding and its place on the timeline.
  focusFinding() {
    const id = this.params.get('finding');
    if (!id) return;
    const art = Array.from(document.querySelectorAll('article.finding')).find((a) => a.dataset.rule === id);
    const box = document.getElementById('findings');
    if (!art) {
      box.querySelector('.section').prepend(aisp.errorBox({ kind: 'not_found', message: `no finding ${id} in this profile now`, hint: 'The rules may have changed since the answer was written; the findings below are current.' }));
      return;
    }
    art.classList.add('target');
    const details = art.querySelector('details');
    if (details) details.open = true;
    const link = art.querySelector('a.to-timeline');
    if (link && !this.params.get('start_ns')) this.showOnTimeline(Number(link.dataset.start), Number(link.dataset.end));
    art.scrollIntoView({ block: 'center' });
  },

  async loadRankSet(q) {
    const el = document.getElementById('ranks-section');
    let html = '';
    try {
      html = await aisp.html('/dashboard/profile/ranks?' + q);
    } catch (e) {
      if (e.status === 401) return true;
      el.replaceChildren(aisp.errorBox(e));
      html = null;
    }
    if (html === '') return false;
    if (html !== null) el.innerHTML = html; // server-rendered, escaped on the server
    document.querySelectorAll('#profile > section.panel').forEach((p) => { p.hidden = p.id !== 'ranks'; });
    document.querySelector('#profile .actions').hidden = true;
    el.dataset.loaded = '1';
    window.aispReady = performance.now();
    document.body.dataset.ready = '1';
    return true;
  },

  async loadSection(el, q) {
    try {
      const html = await aisp.html('/dashboard/profile/' + el.dataset.section + '?' + q);
      el.innerHTML = html; // server-rendered, escaped on the server
    } catch (e) {
      if (e.status !== 401) el.replaceChildren(aisp.errorBox(e));
    }
    el.dataset.loaded = '1';
    this.done();
  },

  startTimeline(scope) {
    const canvas = document.getElementById('tl-canvas');
    const label = document.getElementById('tl-window');
    const tl = new Timeline(canvas, document.getElementById('tl-tip'), {
      path: scope.path,
      device: scope.device,
      process: scope.process,
      onWindow: (v) => {
        label.textContent = `${(v.start / 1e9).toFixed(6)} s – ${(v.end / 1e9).toFixed(6)} s (${aisp.fmtNs(v.end - v.start)})`;
        clearTimeout(this.urlTimer);
        this.urlTimer = setTimeout(() => {
          const p = new URLSearchParams(location.search);
          p.set('start_ns', Math.round(v.start));
          p.set('end_ns', Math.round(v.end));
          history.replaceState(null, '', location.pathname + '?' + p.toString() + location.hash);
        }, 300);
      },
      onError: (e) => this.timelineError(e),
      onFirstDraw: () => this.done(),
    });
    this.timeline = tl;
    window.aispTimeline = tl;
    document.getElementById('tl-zoom-in').addEventListener('click', () => tl.zoom(0.5));
    document.getElementById('tl-zoom-out').addEventListener('click', () => tl.zoom(2));
    document.getElementById('tl-reset').addEventListener('click', () => tl.reset());
    const s = Number(this.params.get('start_ns'));
    const e = Number(this.params.get('end_ns'));
    const win = this.params.get('start_ns') && e > s ? { start: s, end: e } : null;
    tl.load(win).then(() => tl.opts.onWindow(tl.view)).catch((err) => { this.timelineError(err); this.done(); });
  },

  timelineError(e) {
    if (e.status === 401) return;
    const wrap = document.getElementById('tl-wrap');
    wrap.parentElement.insertBefore(aisp.errorBox(e), wrap);
  },

  showOnTimeline(start, end) {
    if (!this.timeline) return;
    this.timeline.setWindow(start, end);
    document.getElementById('timeline').scrollIntoView({ behavior: 'smooth', block: 'start' });
  },

  async perfetto() {
    const status = document.getElementById('perfetto-status');
    status.textContent = 'exporting…';
    try {
      // The export's argument naming the output kind, from its schema (no second list of arguments here).
      const tool = await aisp.get('/api/tools/aisp_profile_export');
      const props = (tool.input_schema && tool.input_schema.properties) || {};
      const key = ['kind', 'format'].find((k) => props[k] && JSON.stringify(props[k]).includes('perfetto')) || 'format';
      const args = Object.assign({}, this.scope, { [key]: 'perfetto', overwrite: true });
      const out = await aisp.post(tool.path, args);
      const file = String(out.output || '').split(/[\\/]/).pop();
      const r = await aisp.request('GET', '/dashboard/download/' + encodeURIComponent(file));
      if (!r.ok) throw new ApiError((await r.json()).error, r.status);
      const blob = await r.blob();
      const a = aisp.el('a', { href: URL.createObjectURL(blob), download: file });
      document.body.append(a);
      a.click();
      a.remove();
      status.textContent = `${file} (${(blob.size / 1e6).toFixed(1)} MB): open it at ui.perfetto.dev`;
    } catch (e) {
      status.replaceChildren(aisp.errorBox(e));
    }
  },

  async loadCaptures() {
    const sel = document.getElementById('captures-select');
    try {
      const list = await aisp.post('/api/profile/list', {});
      for (const c of list.captures || []) {
        const a = c.artifacts || {};
        if (!(a.sqlite || a.nsys_rep)) continue;
        sel.append(aisp.el('option', { value: c.run_id, text: `${c.run_id} — ${(c.command || []).join(' ').slice(0, 60)}` }));
      }
      if (sel.options.length === 1) sel.options[0].textContent = 'no captures';
    } catch (e) {
      sel.options[0].textContent = 'captures unavailable';
    }
    sel.addEventListener('change', () => {
      if (sel.value) location.href = '/profiles?path=' + encodeURIComponent(sel.value);
    });
  },

  bindUpload() {
    const input = document.getElementById('upload-input');
    const status = document.getElementById('upload-status');
    input.addEventListener('change', async () => {
      const f = input.files[0];
      if (!f) return;
      status.textContent = `uploading ${f.name} (${(f.size / 1e6).toFixed(1)} MB)…`;
      try {
        const r = await aisp.request('POST', '/dashboard/upload?name=' + encodeURIComponent(f.name), undefined, { raw: f });
        const out = await r.json();
        if (!r.ok) throw new ApiError(out.error, r.status);
        location.href = '/profiles?path=' + encodeURIComponent(out.path);
      } catch (e) {
        status.replaceChildren(aisp.errorBox(e));
      }
    });
  },
};

document.addEventListener('DOMContentLoaded', () => profilePage.start());
