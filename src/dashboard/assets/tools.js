// aisp dashboard: the tools pages. The list comes from GET /api/tools, each
// form from the tool's input schema (GET /api/tools/<tool>): a new operation
// appears here without page code.
'use strict';

function toolDomain(t) {
  const parts = t.path.split('/').filter(Boolean); // ['api', domain, op] or ['api', op]
  return parts.length === 3 ? parts[1] : 'general';
}

async function toolsPage() {
  const slot = document.getElementById('tool-list');
  let tools;
  try { tools = (await aisp.get('/api/tools')).tools; } catch (e) { if (e.status !== 401) slot.replaceChildren(aisp.errorBox(e)); return; }
  const filter = document.getElementById('tool-filter');
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const groups = new Map();
    for (const t of tools) {
      if (q && !(t.tool + ' ' + t.summary).toLowerCase().includes(q)) continue;
      const d = toolDomain(t);
      if (!groups.has(d)) groups.set(d, []);
      groups.get(d).push(t);
    }
    const out = [];
    for (const [d, list] of groups) {
      out.push(aisp.el('div', { class: 'tool-domain', text: d }));
      for (const t of list) {
        const badges = aisp.el('span');
        if (t.long_running) badges.append(aisp.el('span', { class: 'badge', text: 'long-running' }));
        if (t.needs_gpu) badges.append(aisp.el('span', { class: 'badge', text: 'GPU' }));
        if (t.executes_commands) badges.append(aisp.el('span', { class: 'badge', text: 'runs commands' }));
        out.push(aisp.el('div', { class: 'tool-row', 'data-tool': t.tool },
          aisp.el('a', { href: '/tools/' + t.tool, text: t.tool }), aisp.el('span', { text: t.summary }), badges));
      }
    }
    slot.replaceChildren(...(out.length ? out : [aisp.el('p', { class: 'muted', text: 'No tool matches.' })]));
  };
  filter.addEventListener('input', render);
  render();
}

// ---- one tool's form ---------------------------------------------------------------------------

function schemaType(p) {
  let t = p.type;
  if (Array.isArray(t)) t = t.find((x) => x !== 'null') || t[0];
  if (!t && (p.enum || p.oneOf)) t = 'string';
  return t || 'json';
}

function choices(p) {
  if (p.enum) return p.enum.map((v) => ({ value: v, title: String(v) }));
  if (p.oneOf && p.oneOf.every((o) => 'const' in o)) {
    return p.oneOf.map((o) => ({ value: o.const, title: o.description ? `${o.const} — ${o.description}` : String(o.const) }));
  }
  return null;
}

function fieldFor(name, p, required) {
  const id = 'f-' + name;
  const type = schemaType(p);
  let input;
  let read;
  const opts = choices(p);
  if (opts) {
    input = aisp.el('select', { id, name });
    input.append(aisp.el('option', { value: '', text: required ? '(choose)' : '(default)' }));
    opts.forEach((o, i) => input.append(aisp.el('option', { value: String(i), text: o.title })));
    read = () => (input.value === '' ? undefined : opts[Number(input.value)].value);
    input.setValue = (v) => { const i = opts.findIndex((o) => o.value === v); input.value = i < 0 ? '' : String(i); };
  } else if (type === 'boolean') {
    input = aisp.el('select', { id, name });
    for (const [v, t] of [['', '(default)'], ['true', 'true'], ['false', 'false']]) input.append(aisp.el('option', { value: v, text: t }));
    read = () => (input.value === '' ? undefined : input.value === 'true');
    input.setValue = (v) => { input.value = v === true ? 'true' : v === false ? 'false' : ''; };
  } else if (type === 'integer' || type === 'number') {
    input = aisp.el('input', { id, name, type: 'number', step: type === 'integer' ? '1' : 'any' });
    read = () => (input.value === '' ? undefined : Number(input.value));
    input.setValue = (v) => { input.value = v === undefined ? '' : String(v); };
  } else if (type === 'string') {
    input = aisp.el('input', { id, name, type: 'text' });
    read = () => (input.value === '' ? undefined : input.value);
    input.setValue = (v) => { input.value = v === undefined ? '' : String(v); };
  } else if (type === 'array' && p.items && ['string', 'integer', 'number'].includes(schemaType(p.items)) && !choices(p.items)) {
    const it = schemaType(p.items);
    input = aisp.el('textarea', { id, name, rows: '2', placeholder: 'one value per line' });
    read = () => {
      const vals = input.value.split('\n').map((s) => s.trim()).filter((s) => s !== '');
      if (!vals.length) return undefined;
      return it === 'string' ? vals : vals.map(Number);
    };
    input.setValue = (v) => { input.value = Array.isArray(v) ? v.join('\n') : ''; };
  } else {
    input = aisp.el('textarea', { id, name, rows: '3', placeholder: 'JSON' });
    read = () => {
      if (input.value.trim() === '') return undefined;
      try { return JSON.parse(input.value); } catch (e) { throw new ApiError({ kind: 'invalid_input', message: `${name} is not valid JSON: ${e.message}`, hint: 'Write the value as JSON.' }); }
    };
    input.setValue = (v) => { input.value = v === undefined ? '' : JSON.stringify(v, null, 1); };
  }
  const label = aisp.el('label', { for: id }, name, required ? aisp.el('span', { class: 'req', text: ' *' }) : null);
  const row = aisp.el('div', { class: 'field', 'data-field': name }, label, input);
  const desc = [p.description || '', opts || type === 'json' ? '' : `(${type})`].filter(Boolean).join(' ');
  if (desc) row.append(aisp.el('div', { class: 'desc', text: desc }));
  return { name, row, input, read };
}

// A form for one tool, generated from its input schema (GET /api/tools/<tool>), for the pages
// that call a tool themselves (compare, benchmarks, planner, ask). `skip`: arguments the page
// sets itself; `first`: arguments shown first. Returns the tool, its fields, fill() and args().
async function schemaForm(toolName, form, opts) {
  const o = Object.assign({ skip: [], first: [], submit: 'Run', example: true }, opts || {});
  const t = await aisp.get('/api/tools/' + encodeURIComponent(toolName));
  const schema = t.input_schema || {};
  const req = new Set(schema.required || []);
  const skip = new Set(['async', 'timeout_s'].concat(o.skip));
  const names = Object.keys(schema.properties || {}).filter((n) => !skip.has(n));
  names.sort((a, b) => {
    const ia = o.first.indexOf(a), ib = o.first.indexOf(b);
    return (ia < 0 ? 1e9 : ia) - (ib < 0 ? 1e9 : ib);
  });
  const fields = names.map((n) => fieldFor(n, schema.properties[n], req.has(n)));
  const ui = {
    tool: t,
    fields,
    fill(args) { for (const f of fields) f.input.setValue(args[f.name]); },
    args() {
      const out = {};
      for (const f of fields) { const v = f.read(); if (v !== undefined) out[f.name] = v; }
      return out;
    },
  };
  const main = fields.filter((f) => req.has(f.name) || o.first.includes(f.name));
  const more = fields.filter((f) => !main.includes(f));
  const parts = main.map((f) => f.row);
  if (more.length) parts.push(aisp.el('details', { class: 'more-args' }, aisp.el('summary', { text: `more arguments (${more.length})` }), ...more.map((f) => f.row)));
  const actions = aisp.el('div', { class: 'form-actions' }, aisp.el('button', { type: 'submit', text: o.submit }));
  if (t.example && o.example) actions.append(aisp.el('button', { type: 'button', text: 'Fill the example', onclick: () => ui.fill(t.example) }));
  parts.push(actions);
  form.classList.add('schema-form');
  form.dataset.tool = t.tool;
  form.replaceChildren(...parts);
  return ui;
}

const toolPage = {
  async start() {
    const name = decodeURIComponent(location.pathname.split('/').pop());
    const form = document.getElementById('tool-form');
    document.getElementById('tool-title').textContent = name;
    document.title = name + ' · aisp';
    let t;
    try { t = await aisp.get('/api/tools/' + encodeURIComponent(name)); } catch (e) { if (e.status !== 401) form.replaceChildren(aisp.errorBox(e)); return; }
    this.tool = t;
    document.getElementById('tool-summary').textContent = t.summary;
    document.getElementById('tool-description').textContent = t.description;
    const badges = document.getElementById('tool-badges');
    badges.append(aisp.el('span', { class: 'badge', text: 'POST ' + t.path }));
    if (t.long_running) badges.append(aisp.el('span', { class: 'badge', text: 'long-running: runs as a job with progress' }));
    if (t.needs_gpu) badges.append(aisp.el('span', { class: 'badge', text: 'needs a GPU' }));
    if (t.executes_commands) badges.append(aisp.el('span', { class: 'badge', text: 'runs commands (needs --allow-exec)' }));
    const schema = t.input_schema || {};
    const req = new Set(schema.required || []);
    // `async` is the page's to set: long-running tools always run as jobs here.
    this.fields = Object.entries(schema.properties || {})
      .filter(([n]) => n !== 'async')
      .map(([n, p]) => fieldFor(n, p, req.has(n)));
    const actions = aisp.el('div', { class: 'form-actions' },
      aisp.el('button', { type: 'submit', id: 'tool-submit', text: 'Run' }),
      t.example ? aisp.el('button', { type: 'button', id: 'tool-example', text: 'Fill the example', onclick: () => this.fill(t.example) }) : null,
      aisp.el('button', { type: 'button', text: 'Clear', onclick: () => this.fill({}) }));
    form.replaceChildren(...this.fields.map((f) => f.row), actions);
    if (!this.fields.length) form.prepend(aisp.el('p', { class: 'muted', text: 'This tool takes no arguments.' }));
    const pre = new URLSearchParams(location.search).get('args');
    if (pre) { try { this.fill(JSON.parse(pre)); } catch (e) { /* a bad link leaves the form empty */ } }
    form.addEventListener('submit', (ev) => { ev.preventDefault(); this.run(); });
    document.getElementById('tool-cancel').addEventListener('click', () => this.cancel());
    document.body.dataset.ready = '1';
  },

  fill(args) {
    for (const f of this.fields) f.input.setValue(args[f.name]);
  },

  args() {
    const out = {};
    for (const f of this.fields) {
      const v = f.read();
      if (v !== undefined) out[f.name] = v;
    }
    return out;
  },

  show(state) {
    document.getElementById('tool-run').hidden = false;
    const err = document.getElementById('tool-error');
    const res = document.getElementById('tool-result');
    if (state.error) { err.replaceChildren(aisp.errorBox(state.error)); } else err.replaceChildren();
    res.textContent = state.result === undefined ? '' : JSON.stringify(state.result, null, 2);
    res.hidden = state.result === undefined;
    document.getElementById('tool-progress').hidden = !state.progress;
  },

  async run() {
    let args;
    try { args = this.args(); } catch (e) { this.show({ error: e }); return; }
    const btn = document.getElementById('tool-submit');
    btn.disabled = true;
    this.show({ progress: this.tool.long_running });
    document.getElementById('tool-result').dataset.state = 'running';
    try {
      if (this.tool.long_running) {
        const ticket = await aisp.post(this.tool.path, Object.assign({}, args, { async: true }));
        this.job = ticket.job_id;
        await this.follow(ticket.job_id);
      } else {
        const out = await aisp.post(this.tool.path, args);
        this.show({ result: out });
      }
    } catch (e) {
      this.show({ error: e });
    } finally {
      btn.disabled = false;
      this.job = null;
      document.getElementById('tool-result').dataset.state = 'done';
    }
  },

  async follow(id) {
    const bar = document.getElementById('tool-progress-bar');
    const text = document.getElementById('tool-progress-text');
    text.textContent = 'queued';
    for (;;) {
      const job = await aisp.post('/api/job/status', { job_id: id });
      const p = job.progress;
      if (p && p.total) { bar.max = p.total; bar.value = p.progress; } else bar.removeAttribute('value');
      const count = p && p.total ? ` ${Math.round(p.progress)} of ${Math.round(p.total)}` : '';
      text.textContent = `${job.state}${count}${p && p.message ? ' — ' + p.message : ''}`;
      if (['succeeded', 'failed', 'cancelled', 'timed_out'].includes(job.state)) {
        if (job.state === 'succeeded') this.show({ result: job.result });
        else this.show({ error: job.error || { kind: job.state, message: 'the job ' + job.state } });
        return;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  },

  async cancel() {
    if (!this.job) return;
    try { await aisp.post('/api/job/cancel', { job_id: this.job }); } catch (e) { this.show({ error: e, progress: true }); }
  },
};

document.addEventListener('DOMContentLoaded', () => {
  const page = document.body.dataset.page;
  if (page === 'tools') toolsPage();
  if (page === 'tool') toolPage.start();
});
