// aisp dashboard: the compare page. The form is aisp_profile_compare's input schema; the result
// is rendered on the server from the detailed answer (verdict, evidence, deltas as SVG charts). /compare?before=&after=
// links straight to a comparison.
'use strict';

const comparePage = {
  async start() {
    const form = document.getElementById('compare-form');
    let ui;
    try {
      ui = await schemaForm('aisp_profile_compare', form, { skip: ['detail'], first: ['before', 'after'], submit: 'Compare', example: false });
    } catch (e) { if (e.status !== 401) form.replaceChildren(aisp.errorBox(e)); return; }
    this.ui = ui;
    for (const f of ui.fields) if (['before', 'after'].includes(f.name)) f.input.setAttribute('list', 'capture-runs');
    this.loadCaptures();
    const params = new URLSearchParams(location.search);
    const pre = {};
    for (const f of ui.fields) {
      const v = params.get(f.name);
      if (v !== null && v !== '') pre[f.name] = f.input.type === 'number' ? Number(v) : v;
    }
    ui.fill(pre);
    form.addEventListener('submit', (ev) => { ev.preventDefault(); this.run(); });
    if (pre.before && pre.after) await this.run();
    document.body.dataset.ready = '1';
  },

  async run() {
    let args;
    try { args = this.ui.args(); } catch (e) { document.getElementById('compare-view').replaceChildren(aisp.errorBox(e)); return; }
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(args)) q.set(k, typeof v === 'string' ? v : JSON.stringify(v));
    history.replaceState(null, '', '/compare?' + q.toString());
    const slot = document.getElementById('compare-view');
    await aisp.view('compare', args, slot, { label: 'comparing' });
  },

  async loadCaptures() {
    try {
      const list = await aisp.tool('aisp_profile_list', {});
      const dl = document.getElementById('capture-runs');
      for (const c of list.captures || []) {
        const a = c.artifacts || {};
        if (a.sqlite || a.nsys_rep) dl.append(aisp.el('option', { value: c.run_id, text: (c.command || []).join(' ').slice(0, 80) }));
      }
    } catch (e) { /* the form works with paths alone */ }
  },
};

document.addEventListener('DOMContentLoaded', () => comparePage.start());
