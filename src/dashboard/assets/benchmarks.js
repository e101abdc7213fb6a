// aisp dashboard: the benchmarks page. The import form is aisp_benchmark_import's input schema,
// the filter form aisp_analyze_leaderboards' (the filters every benchmark analysis shares); the
// body is rendered on the server from the history and the analyses.
'use strict';

const benchmarksPage = {
  async start() {
    const importForm = document.getElementById('import-form');
    const filterForm = document.getElementById('bench-filter');
    try {
      this.importUi = await schemaForm('aisp_benchmark_import', importForm, { submit: 'Import' });
      this.filterUi = await schemaForm('aisp_analyze_leaderboards', filterForm, { first: ['target', 'device', 'run_id'], submit: 'Show', example: false });
    } catch (e) { if (e.status !== 401) importForm.replaceChildren(aisp.errorBox(e)); return; }
    if (this.importUi.tool.example) this.importUi.fill(this.importUi.tool.example);
    const params = new URLSearchParams(location.search);
    const pre = {};
    for (const f of this.filterUi.fields) { const v = params.get(f.name); if (v) pre[f.name] = v; }
    this.filterUi.fill(pre);
    importForm.addEventListener('submit', (ev) => { ev.preventDefault(); this.importRuns(); });
    filterForm.addEventListener('submit', (ev) => { ev.preventDefault(); this.show(); });
    await this.show();
    document.body.dataset.ready = '1';
  },

  async show() {
    let args;
    try { args = this.filterUi.args(); } catch (e) { document.getElementById('bench-view').replaceChildren(aisp.errorBox(e)); return; }
    history.replaceState(null, '', '/benchmarks' + (Object.keys(args).length ? '?' + new URLSearchParams(args).toString() : ''));
    await aisp.view('benchmarks', args, document.getElementById('bench-view'), { label: 'reading the history' });
  },

  async importRuns() {
    const status = document.getElementById('import-status');
    status.replaceChildren(aisp.el('span', { class: 'muted', text: 'importing…' }));
    try {
      const out = await aisp.tool(this.importUi.tool.tool, this.importUi.args());
      const runs = (out.runs || []).map((r) => `${r.run_id} (${r.device_name || 'unknown GPU'}, ${r.rows} results${r.already_present ? ', already present' : ''})`);
      status.replaceChildren(aisp.el('p', { class: 'import-done', 'data-rows-added': out.rows_added, text: `${out.rows_added} results added from ${runs.length} run(s): ${runs.join('; ')}` }));
      await this.show();
    } catch (e) {
      status.replaceChildren(aisp.errorBox(e));
    }
  },
};

document.addEventListener('DOMContentLoaded', () => benchmarksPage.start());
