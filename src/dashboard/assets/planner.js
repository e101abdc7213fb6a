// aisp dashboard: the planner page. Both forms are generated from the input schemas of
// aisp_distributed_plan and aisp_inference_estimate (filled with each tool's example); the
// answers are rendered on the server (ranked layouts, memory bars, rejections, batch sweep).
// /planner?plan=<json>&estimate=<json> opens with those arguments and runs them.
'use strict';

const plannerPage = {
  async start() {
    const params = new URLSearchParams(location.search);
    const forms = [
      ['plan', 'aisp_distributed_plan', 'Plan'],
      ['estimate', 'aisp_inference_estimate', 'Estimate'],
    ];
    this.ui = {};
    for (const [view, tool, submit] of forms) {
      const form = document.getElementById(view + '-form');
      let ui;
      try {
        ui = await schemaForm(tool, form, { first: ['model', 'gpu', 'gpus', 'nodes', 'gpus_per_node'], submit });
      } catch (e) { if (e.status !== 401) form.replaceChildren(aisp.errorBox(e)); continue; }
      this.ui[view] = ui;
      let pre = ui.tool.example || {};
      if (params.get(view)) { try { pre = JSON.parse(params.get(view)); } catch (e) { /* a bad link keeps the example */ } }
      ui.fill(pre);
      form.addEventListener('submit', (ev) => { ev.preventDefault(); this.run(view); });
      if (params.get(view)) await this.run(view);
    }
    document.body.dataset.ready = '1';
  },

  async run(view) {
    const slot = document.getElementById(view + '-view');
    let args;
    try { args = this.ui[view].args(); } catch (e) { slot.replaceChildren(aisp.errorBox(e)); return false; }
    const q = new URLSearchParams(location.search);
    q.set(view, JSON.stringify(args));
    history.replaceState(null, '', '/planner?' + q.toString());
    return aisp.view(view, args, slot, { label: view === 'plan' ? 'searching layouts' : 'estimating' });
  },
};

document.addEventListener('DOMContentLoaded', () => plannerPage.start());
