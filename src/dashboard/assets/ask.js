// aisp dashboard: the ask page. aisp_ask runs as a background job (async: true); its progress
// messages are streamed into the chat as they change (aisp_job_status), Cancel stops it
// (aisp_job_cancel). The answer's [E1] labels link to its citations; a citation of a profile tool
// opens that profile, and a finding opens the profile page at that finding.
'use strict';

const PROFILE_TOOL = /^aisp_(profile_|analyze_bottlenecks)/;

function profileLink(path, finding) {
  const q = new URLSearchParams({ path });
  if (finding) q.set('finding', finding);
  return '/profiles?' + q.toString() + (finding ? '#findings' : '');
}

function citationHref(c) {
  const args = c.arguments || {};
  const path = args.path || args.profile;
  if (path && PROFILE_TOOL.test(c.tool) && typeof path === 'string') return profileLink(path);
  return '/tools/' + encodeURIComponent(c.tool) + '?args=' + encodeURIComponent(JSON.stringify(args));
}

// Inline markdown of the answer: **bold**, `code`, [E1] evidence labels. Text only, never HTML.
function inline(text, cites, prefix) {
  const out = [];
  for (const part of text.split(/(\*\*[^*]+\*\*|`[^`]+`|\[E\d+\])/g)) {
    if (!part) continue;
    if (part.startsWith('**') && part.endsWith('**') && part.length > 4) out.push(aisp.el('strong', { text: part.slice(2, -2) }));
    else if (part.startsWith('`') && part.endsWith('`') && part.length > 2) out.push(aisp.el('code', { text: part.slice(1, -1) }));
    else if (/^\[E\d+\]$/.test(part) && cites.has(part.slice(1, -1))) {
      out.push(aisp.el('a', { class: 'cite-ref', href: '#' + prefix + part.slice(1, -1), text: part }));
    } else out.push(document.createTextNode(part));
  }
  return out;
}

function renderMarkdown(md, cites, prefix) {
  const root = aisp.el('div', { class: 'answer-text' });
  let list = null;
  for (const raw of md.split('\n')) {
    const line = raw.replace(/\s+$/, '');
    const item = /^(\s*)[-*] (.*)$/.exec(line);
    if (item) {
      if (!list) { list = aisp.el('ul'); root.append(list); }
      list.append(aisp.el('li', { class: item[1].length ? 'sub' : null }, ...inline(item[2], cites, prefix)));
      continue;
    }
    list = null;
    if (!line.trim()) continue;
    const head = /^(#{1,4}) (.*)$/.exec(line);
    if (head) root.append(aisp.el('h4', {}, ...inline(head[2], cites, prefix)));
    else if (line.startsWith('> ')) root.append(aisp.el('blockquote', {}, ...inline(line.slice(2), cites, prefix)));
    else root.append(aisp.el('p', {}, ...inline(line, cites, prefix)));
  }
  return root;
}

const askPage = {
  conversation: null,
  turn: 0,

  async start() {
    const form = document.getElementById('ask-form');
    try {
      this.ui = await schemaForm('aisp_ask', form, { skip: ['conversation_id'], first: ['question', 'path', 'context'], submit: 'Ask' });
    } catch (e) { if (e.status !== 401) form.replaceChildren(aisp.errorBox(e)); return; }
    // The question reads better as a text area.
    const q = this.ui.fields.find((f) => f.name === 'question');
    if (q) {
      const ta = aisp.el('textarea', { id: 'f-question', name: 'question', rows: '2', placeholder: 'e.g. why is this training step slow?' });
      ta.setValue = (v) => { ta.value = v === undefined ? '' : String(v); };
      q.input.replaceWith(ta);
      q.input = ta;
      q.read = () => (ta.value.trim() === '' ? undefined : ta.value.trim());
    }
    const params = new URLSearchParams(location.search);
    const pre = {};
    for (const f of this.ui.fields) { const v = params.get(f.name); if (v) pre[f.name] = v; }
    this.ui.fill(pre);
    form.addEventListener('submit', (ev) => { ev.preventDefault(); this.ask(); });
    document.getElementById('ask-new').addEventListener('click', () => this.setConversation(null));
    try {
      const st = await aisp.tool('aisp_status', {});
      document.getElementById('ask-mode').textContent = st.llm && st.llm.configured
        ? `LLM: ${st.llm.model || 'configured'} at ${st.llm.base_url || 'the configured endpoint'}; aisp's tools supply the evidence.`
        : 'No LLM configured: answers are composed offline from aisp\'s tools and knowledge base (set AISP_LLM_BASE_URL and AISP_LLM_MODEL, or an API key, to use one).';
    } catch (e) { /* the mode line is informative only */ }
    document.body.dataset.ready = '1';
    if (pre.question && params.get('run') === '1') this.ask();
  },

  setConversation(id) {
    this.conversation = id;
    document.getElementById('ask-conversation').textContent = id ? `continuing conversation ${id}` : '';
    if (!id) document.getElementById('chat').replaceChildren();
  },

  async ask() {
    let args;
    const chat = document.getElementById('chat');
    try { args = this.ui.args(); } catch (e) { chat.append(aisp.errorBox(e)); return; }
    if (!args.question) return;
    if (this.conversation) args.conversation_id = this.conversation;
    this.turn += 1;
    const turn = this.turn;
    chat.append(aisp.el('div', { class: 'msg user' }, aisp.el('div', { class: 'who', text: 'you' }), aisp.el('p', { text: args.question })));
    const log = aisp.el('ul', { class: 'progress-log small' });
    const cancel = aisp.el('button', { type: 'button', class: 'cancel', text: 'Cancel' });
    const status = aisp.el('div', { class: 'ask-progress' }, aisp.el('progress'), ' ', aisp.el('span', { class: 'small state', text: 'starting…' }), ' ', cancel);
    const msg = aisp.el('div', { class: 'msg assistant', 'data-turn': turn, 'data-state': 'running' }, aisp.el('div', { class: 'who', text: 'aisp' }), status, log);
    chat.append(msg);
    msg.scrollIntoView({ block: 'end' });
    const submit = document.querySelector('#ask-form button[type=submit]');
    submit.disabled = true;
    let job = null;
    cancel.addEventListener('click', async () => {
      if (!job) return;
      try { await aisp.tool('aisp_job_cancel', { job_id: job }); } catch (e) { log.append(aisp.el('li', {}, aisp.errorBox(e))); }
    });
    try {
      const ticket = await aisp.tool('aisp_ask', Object.assign({}, args, { async: true }));
      job = ticket.job_id;
      const done = await this.follow(job, status.querySelector('.state'), log);
      status.remove();
      if (done.state === 'succeeded') {
        this.render(msg, done.result, turn);
        if (done.result.conversation_id) this.setConversation(done.result.conversation_id);
        const qf = this.ui.fields.find((f) => f.name === 'question');
        if (qf) qf.input.value = '';
      } else {
        msg.append(aisp.errorBox(done.error || { kind: done.state, message: 'the question was ' + done.state }));
      }
      msg.dataset.state = done.state;
    } catch (e) {
      status.remove();
      msg.append(aisp.errorBox(e));
      msg.dataset.state = 'failed';
    } finally {
      submit.disabled = false;
    }
  },

  // Poll the job; each new progress message becomes a line of the log (streamed progress).
  async follow(id, state, log) {
    let last = '';
    for (;;) {
      const job = await aisp.tool('aisp_job_status', { job_id: id });
      const p = job.progress;
      const message = p && p.message ? p.message : '';
      if (message && message !== last) { log.append(aisp.el('li', { text: message })); last = message; }
      state.textContent = job.state + (p && p.total ? ` · step ${Math.round(p.progress)} of ${Math.round(p.total)}` : '');
      if (['succeeded', 'failed', 'cancelled', 'timed_out'].includes(job.state)) return job;
      await new Promise((r) => setTimeout(r, 300));
    }
  },

  render(msg, r, turn) {
    const prefix = `t${turn}-`;
    const cites = new Map((r.citations || []).map((c) => [c.id, c]));
    msg.append(renderMarkdown(r.answer || '', cites, prefix));
    const findings = r.findings || [];
    if (findings.length) {
      const ul = aisp.el('ul', { class: 'ask-findings' });
      for (const f of findings) {
        const c = cites.get(f.evidence_id);
        const path = c && c.arguments && (c.arguments.path || c.arguments.profile);
        const li = aisp.el('li', { 'data-finding': f.id },
          aisp.el('span', { class: 'sev sev-' + (f.severity === 'high' ? 'warning' : f.severity) , text: f.severity }), ' ',
          aisp.el('strong', { text: f.title }), ' ');
        if (path) li.append(aisp.el('a', { class: 'finding-link', href: profileLink(path, f.id), text: 'open in the profile' }));
        if (f.evidence_id && cites.has(f.evidence_id)) li.append(' ', aisp.el('a', { class: 'cite-ref', href: '#' + prefix + f.evidence_id, text: '[' + f.evidence_id + ']' }));
        ul.append(li);
      }
      msg.append(aisp.el('h4', { text: 'Findings' }), ul);
    }
    if (cites.size) {
      const ol = aisp.el('ol', { class: 'citations' });
      for (const c of cites.values()) {
        ol.append(aisp.el('li', { id: prefix + c.id, class: 'citation', 'data-cite': c.id, 'data-tool': c.tool },
          aisp.el('strong', { text: c.id }), ' ',
          aisp.el('a', { href: citationHref(c), text: c.tool }), ' ',
          aisp.el('code', { text: JSON.stringify(c.arguments || {}) }),
          c.ok === false ? aisp.el('span', { class: 'sev sev-critical', text: 'failed' }) : null,
          aisp.el('div', { class: 'quote small', text: c.quote || '' })));
      }
      msg.append(aisp.el('h4', { text: 'Evidence' }), ol);
    }
    const meta = [r.llm_used ? `LLM ${r.model || ''}` : 'no LLM (offline composer)', `intent ${r.intent || '—'}`, `${r.steps} step(s)`, `${r.tokens_used || 0} tokens`];
    msg.append(aisp.el('p', { class: 'muted small', text: meta.join(' · ') }));
    for (const n of r.notes || []) msg.append(aisp.el('p', { class: 'muted small', text: n }));
  },
};

document.addEventListener('DOMContentLoaded', () => askPage.start());
