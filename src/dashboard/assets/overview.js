// aisp dashboard: the overview. GPUs live (aisp_status says whether NVML found any and why not;
// aisp_gpu_info is read once a second and drawn as sparklines), then the server-rendered triage
// next steps and software-stack problems.
'use strict';

const SPARK_POINTS = 60;

// What each sparkline shows, read from one GPU of aisp_gpu_info: [label, value, scale top, unit,
// whether the value is shown against that top ("3 MiB of 81559")].
const GPU_METRICS = [
  ['utilization', (g) => g.utilization_gpu_pct, () => 100, '%', false],
  ['memory used', (g) => g.memory && g.memory.used_mib, (g) => g.memory && g.memory.total_mib, 'MiB', true],
  ['power', (g) => g.power_draw_w, (g) => g.power_limit_enforced_w, 'W', true],
  ['SM clock', (g) => g.clocks && g.clocks.sm_mhz, (g) => g.clocks && g.clocks.sm_max_mhz, 'MHz', true],
  ['temperature', (g) => g.temperature && g.temperature.gpu_c, (g) => (g.temperature && g.temperature.slowdown_c) || 100, '°C', false],
];

function sparkline(values, max) {
  const NS = 'http://www.w3.org/2000/svg';
  const w = 160, h = 34;
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('class', 'spark');
  const top = max > 0 ? max : Math.max(1, ...values.filter((v) => v != null));
  const pts = values.map((v, i) => v == null ? null
    : `${(w * (i + SPARK_POINTS - values.length) / (SPARK_POINTS - 1)).toFixed(1)},${(h - 2 - (h - 4) * Math.min(v, top) / top).toFixed(1)}`)
    .filter(Boolean);
  const line = document.createElementNS(NS, 'polyline');
  line.setAttribute('points', pts.join(' '));
  svg.append(line);
  return svg;
}

const overviewPage = {
  history: new Map(),

  async start() {
    aisp.view('overview', {}, document.getElementById('overview-view'), { label: 'running the triage' })
      .then(() => { document.getElementById('overview-view').dataset.loaded = '1'; });
    const slot = document.getElementById('gpu-live');
    let st;
    try { st = await aisp.tool('aisp_status', {}); } catch (e) { if (e.status !== 401) slot.replaceChildren(aisp.errorBox(e)); return; }
    if (!st.gpu || !st.gpu.available) {
      slot.replaceChildren(aisp.el('div', { class: 'no-gpu', 'data-state': 'no-gpu' },
        aisp.el('strong', { text: 'No GPU on this machine.' }), ' ',
        aisp.el('span', { class: 'reason', text: (st.gpu && st.gpu.reason) || 'aisp found no GPU.' }),
        aisp.el('div', { class: 'hint', text: 'GPU-free tools still work here: profiles, compare, benchmark history, the planner and ask.' })));
      document.body.dataset.gpu = 'none';
      return;
    }
    document.body.dataset.gpu = String(st.gpu.devices.length);
    this.poll(slot);
  },

  async poll(slot) {
    let wait = 1000;
    try {
      const info = await aisp.tool('aisp_gpu_info', {});
      this.draw(slot, info);
    } catch (e) {
      if (e.status === 401) return;
      let box = slot.querySelector('.poll-error');
      if (!box) { box = aisp.el('div', { class: 'poll-error' }); slot.prepend(box); }
      box.replaceChildren(aisp.errorBox(e));
      wait = 5000;
    }
    setTimeout(() => this.poll(slot), wait);
  },

  draw(slot, info) {
    const old = slot.querySelector('.poll-error');
    if (old) old.remove();
    const cards = [];
    for (const g of info.gpus || []) {
      if (!this.history.has(g.index)) this.history.set(g.index, GPU_METRICS.map(() => []));
      const hist = this.history.get(g.index);
      const rows = GPU_METRICS.map(([label, read, max, unit, against], k) => {
        const v = read(g);
        hist[k].push(v == null ? null : Number(v));
        if (hist[k].length > SPARK_POINTS) hist[k].shift();
        const m = max(g);
        return aisp.el('div', { class: 'metric', 'data-metric': label },
          aisp.el('div', { class: 'label', text: label }),
          aisp.el('div', { class: 'value', text: v == null ? '—' : `${v} ${unit}` + (m && against ? ` of ${m}` : '') }),
          sparkline(hist[k], m || 0));
      });
      cards.push(aisp.el('div', { class: 'gpu-card', 'data-gpu': g.index },
        aisp.el('h4', { text: `GPU ${g.index} · ${g.name}` }),
        aisp.el('div', { class: 'metrics' }, ...rows)));
    }
    slot.replaceChildren(...cards, aisp.el('p', { class: 'muted small', text: `NVML through aisp_gpu_info, every second; last ${SPARK_POINTS} s shown.` }));
  },
};

document.addEventListener('DOMContentLoaded', () => overviewPage.start());
