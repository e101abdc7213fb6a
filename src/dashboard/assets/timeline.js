// aisp dashboard: the interactive timeline (the one JavaScript component).
// Draws the events of the visible window on a canvas, one row per GPU stream
// and per CPU thread (NVTX lanes, CUDA API). Events come from
// POST /api/profile/events for a window three times as wide as the view, at
// one slice per pixel, so panning needs a new fetch only near the edges and
// zooming in fetches the finer detail; the server clusters what is shorter
// than a pixel, so a window over 100k+ events stays a few thousand boxes.
'use strict';

class Timeline {
  constructor(canvas, tip, opts) {
    this.canvas = canvas;
    this.tip = tip;
    this.opts = opts; // {path, device, process, onWindow, onError, onFirstDraw}
    this.ctx = canvas.getContext('2d');
    this.view = null; // {start, end} absolute ns
    this.data = null; // the last answer of profile_events
    this.home = null; // the default window (span of GPU work)
    this.extent = null;
    this.layout = [];
    this.frameTimes = [];
    this.draws = 0;
    this.fetches = 0;
    this.pending = null;
    this.fetchTimer = null;
    this.drawQueued = false;
    this.LABEL_W = 210;
    this.ROW_GPU = 20;
    this.LANE = 15;
    this.GAP = 5;
    this.AXIS = 22;
    this.bind();
  }

  // ---- data ---------------------------------------------------------------------------------
  plotWidth() { return Math.max(100, this.canvas.clientWidth - this.LABEL_W); }

  async load(win) {
    // The first fetch: the window asked for, or the server's default (the span of GPU work).
    const body = { path: this.opts.path, buckets: Math.min(8192, Math.round(this.plotWidth() * 3)) };
    if (this.opts.device !== undefined) body.device = this.opts.device;
    if (this.opts.process !== undefined) body.process = this.opts.process;
    if (win) {
      const w = win.end - win.start;
      body.start_ns = Math.floor(win.start - w);
      body.end_ns = Math.ceil(win.end + w);
    }
    const d = await this.fetchEvents(body);
    this.extent = { start: d.extent_start_ns, end: d.extent_end_ns };
    if (!win) {
      this.home = { start: d.start_ns, end: d.end_ns };
      this.view = { start: d.start_ns, end: d.end_ns };
      this.setData(d);
      this.schedule(0); // fetch the wider window around the view
    } else {
      this.home = null;
      this.view = { start: win.start, end: win.end };
      this.setData(d);
    }
    this.requestDraw();
  }

  async fetchEvents(body) {
    if (this.pending) this.pending.abort();
    const ctl = new AbortController();
    this.pending = ctl;
    this.fetches += 1;
    const t0 = performance.now();
    const d = await aisp.post('/api/profile/events', body, { signal: ctl.signal });
    this.lastFetchMs = performance.now() - t0;
    if (this.pending === ctl) this.pending = null;
    return d;
  }

  setData(d) {
    this.data = d;
    this.canvas.dataset.fetchedStart = d.start_ns;
    this.canvas.dataset.fetchedEnd = d.end_ns;
    this.layoutRows();
  }

  // Fetch again when the view nears the edge of the fetched window or is zoomed in past its resolution.
  needsFetch() {
    const d = this.data;
    if (!d || !this.view) return false;
    const w = this.view.end - this.view.start;
    const margin = w * 0.25;
    const outside = this.view.start - margin < d.start_ns || this.view.end + margin > d.end_ns;
    const pxNs = w / this.plotWidth();
    const tooCoarse = d.bucket_ns > pxNs * 1.5 && d.bucket_ns > 1;
    const tooFine = d.bucket_ns < pxNs / 4;
    return outside || tooCoarse || tooFine;
  }

  schedule(delay) {
    clearTimeout(this.fetchTimer);
    this.fetchTimer = setTimeout(() => this.refetch(), delay === undefined ? 120 : delay);
  }

  async refetch() {
    if (!this.view) return;
    const w = this.view.end - this.view.start;
    const body = {
      path: this.opts.path,
      start_ns: Math.floor(this.view.start - w),
      end_ns: Math.ceil(this.view.end + w),
      buckets: Math.min(8192, Math.round(this.plotWidth() * 3)),
    };
    if (this.opts.device !== undefined) body.device = this.opts.device;
    if (this.opts.process !== undefined) body.process = this.opts.process;
    try {
      const d = await this.fetchEvents(body);
      this.setData(d);
      this.requestDraw();
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (this.opts.onError) this.opts.onError(e);
    }
  }

  // ---- view ---------------------------------------------------------------------------------
  setWindow(start, end) {
    if (!(end > start)) return;
    const minW = 1000;
    if (end - start < minW) { const c = (start + end) / 2; start = c - minW / 2; end = c + minW / 2; }
    if (this.extent) {
      const len = Math.max(1, this.extent.end - this.extent.start);
      const maxW = len * 1.2;
      if (end - start > maxW) { const c = (start + end) / 2; start = c - maxW / 2; end = c + maxW / 2; }
      // Keep some of the events in view: panning stops a tenth of the view past either end.
      const w = end - start;
      const lo = this.extent.start - w * 0.9;
      const hi = this.extent.end + w * 0.9;
      if (start < lo) { start = lo; end = lo + w; }
      if (end > hi) { end = hi; start = hi - w; }
    }
    this.view = { start, end };
    if (this.opts.onWindow) this.opts.onWindow(this.view);
    this.requestDraw();
    if (this.needsFetch()) this.schedule();
  }

  zoom(factor, atX) {
    if (!this.view) return;
    const w = this.view.end - this.view.start;
    const f = atX === undefined ? 0.5 : Math.min(1, Math.max(0, (atX - this.LABEL_W) / this.plotWidth()));
    const pivot = this.view.start + w * f;
    const nw = w * factor;
    this.setWindow(pivot - nw * f, pivot + nw * (1 - f));
  }

  pan(dxPx) {
    if (!this.view) return;
    const w = this.view.end - this.view.start;
    const dt = (dxPx / this.plotWidth()) * w;
    this.setWindow(this.view.start - dt, this.view.end - dt);
  }

  reset() {
    if (this.home) this.setWindow(this.home.start, this.home.end);
    else if (this.extent) this.setWindow(this.extent.start, this.extent.end);
  }

  // ---- layout and drawing -------------------------------------------------------------------
  layoutRows() {
    const rows = [];
    let y = this.AXIS;
    for (const t of this.data.tracks) {
      const h = t.kind === 'gpu' ? this.ROW_GPU : Math.max(1, t.lanes) * this.LANE;
      rows.push({ track: t, y, h });
      y += h + this.GAP;
    }
    this.layout = rows;
    const cssH = Math.max(160, y + 4);
    if (this.cssHeight !== cssH) {
      this.cssHeight = cssH;
      this.canvas.style.height = cssH + 'px';
    }
  }

  requestDraw() {
    if (this.drawQueued) return;
    this.drawQueued = true;
    requestAnimationFrame(() => { this.drawQueued = false; this.draw(); });
  }

  color(name, kind, cluster) {
    if (kind === 'api') {
      if (/Launch|launch/.test(name)) return cluster ? '#8fc98f' : '#4caf50';
      if (/Synchronize|Memcpy(?!Async)/.test(name)) return cluster ? '#e8a0a0' : '#d9534f';
      return cluster ? '#c4cbd4' : '#97a3b2';
    }
    if (name.startsWith('[CUDA memcpy')) return '#e0a030';
    if (name.startsWith('[CUDA memset')) return '#c9a227';
    if (/nccl/i.test(name)) return cluster ? '#e57f74' : '#c0392b';
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    const hue = kind === 'nvtx' ? (Math.abs(h) % 360) : 190 + (Math.abs(h) % 90);
    const sat = kind === 'nvtx' ? 55 : 60;
    const light = kind === 'nvtx' ? 72 : (cluster ? 62 : 45);
    return `hsl(${hue},${sat}%,${light}%)`;
  }

  draw() {
    const t0 = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const cw = this.canvas.clientWidth;
    const ch = this.cssHeight || this.canvas.clientHeight;
    if (this.canvas.width !== Math.round(cw * dpr) || this.canvas.height !== Math.round(ch * dpr)) {
      this.canvas.width = Math.round(cw * dpr);
      this.canvas.height = Math.round(ch * dpr);
    }
    const g = this.ctx;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, cw, ch);
    if (!this.data || !this.view) return;
    const d = this.data;
    const pw = this.plotWidth();
    const x0 = this.LABEL_W;
    const vs = this.view.start;
    const scale = pw / (this.view.end - this.view.start);
    this.drawAxis(g, x0, pw, vs, scale);
    let drawn = 0;
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    for (const row of this.layout) {
      const t = row.track;
      g.fillStyle = row.track.kind === 'gpu' ? '#f3f6fa' : '#fafbfc';
      g.fillRect(x0, row.y, pw, row.h);
      g.save();
      g.beginPath();
      g.rect(x0, row.y, pw, row.h);
      g.clip();
      const laneH = t.kind === 'gpu' ? row.h : this.LANE;
      for (const e of t.events) {
        const s = d.start_ns + e.t_ns;
        let x = x0 + (s - vs) * scale;
        let w = e.dur_ns * scale;
        if (x + w < x0 || x > x0 + pw) continue;
        if (w < 1) w = 1;
        const y = row.y + e.lane * laneH + 1;
        const name = d.names[e.name] || '';
        g.fillStyle = this.color(name, t.kind, e.count > 1);
        // A 1-px gap at the end of each mark wide enough to spare it: consecutive ranges of one colour
        // (NVTX steps, runs of one kernel) stay separate marks instead of one bar.
        g.fillRect(x, y, w > 4 ? w - 1 : w, laneH - 2);
        drawn++;
        if (w > 36) {
          const left = Math.max(x, x0) + 3;
          const room = Math.min(x + w, x0 + pw) - left - 3;
          if (room > 24) {
            g.fillStyle = t.kind === 'nvtx' ? '#1b1f24' : '#fff';
            const label = e.count > 1 ? `${e.count}× ${name}` : name;
            g.fillText(this.fit(g, label, room), left, y + (laneH - 2) / 2);
          }
        }
      }
      g.restore();
    }
    // Labels over a white column.
    g.fillStyle = '#fff';
    g.fillRect(0, 0, x0 - 1, ch);
    g.fillStyle = '#dde2e8';
    g.fillRect(x0 - 1, 0, 1, ch);
    g.font = '12px system-ui, sans-serif';
    for (const row of this.layout) {
      g.fillStyle = row.track.kind === 'gpu' ? '#1d3557' : '#3d4a5c';
      g.fillText(this.fit(g, row.track.label, x0 - 12), 6, row.y + Math.min(row.h, 18) / 2);
    }
    this.draws += 1;
    this.lastDrawn = drawn;
    this.canvas.dataset.windowStart = Math.round(this.view.start);
    this.canvas.dataset.windowEnd = Math.round(this.view.end);
    this.canvas.dataset.drawn = drawn;
    this.canvas.dataset.draws = this.draws;
    const dt = performance.now() - t0;
    this.frameTimes.push(dt);
    if (this.frameTimes.length > 2000) this.frameTimes.shift();
    const stats = document.getElementById('tl-stats');
    if (stats) stats.textContent = `${d.in_window.toLocaleString()} events in the fetched window · ${drawn.toLocaleString()} boxes drawn · ${dt.toFixed(1)} ms`;
    if (this.draws === 1 && this.opts.onFirstDraw) this.opts.onFirstDraw();
  }

  fit(g, text, room) {
    if (g.measureText(text).width <= room) return text;
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (g.measureText(text.slice(0, mid) + '…').width <= room) lo = mid; else hi = mid - 1;
    }
    return lo > 0 ? text.slice(0, lo) + '…' : '';
  }

  drawAxis(g, x0, pw, vs, scale) {
    const w = pw / scale;
    const raw = w / 8;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / mag;
    const step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
    g.fillStyle = '#5f6b7a';
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    const digits = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / 1e9))));
    for (let v = Math.ceil(vs / step) * step; v <= vs + w; v += step) {
      const x = x0 + (v - vs) * scale;
      g.fillRect(x, this.AXIS - 6, 1, 6);
      g.fillStyle = '#eef1f5';
      g.fillRect(x, this.AXIS, 1, (this.cssHeight || 0) - this.AXIS);
      g.fillStyle = '#5f6b7a';
      g.fillText((v / 1e9).toFixed(digits) + ' s', x + 3, 9);
    }
  }

  // ---- interaction --------------------------------------------------------------------------
  bind() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const rect = c.getBoundingClientRect();
      const dir = ev.deltaY > 0 ? 1 : -1;
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) this.pan(-(ev.deltaX || ev.deltaY));
      else this.zoom(dir > 0 ? 1.25 : 0.8, ev.clientX - rect.left);
    }, { passive: false });
    c.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX }; c.classList.add('dragging'); this.hideTip(); });
    window.addEventListener('mousemove', (ev) => {
      if (drag) {
        const dx = ev.clientX - drag.x;
        drag.x = ev.clientX;
        this.pan(dx);
      }
    });
    window.addEventListener('mouseup', () => { drag = null; c.classList.remove('dragging'); });
    c.addEventListener('mousemove', (ev) => { if (!drag) this.hover(ev); });
    c.addEventListener('mouseleave', () => this.hideTip());
    window.addEventListener('resize', () => { if (this.data) { this.requestDraw(); if (this.needsFetch()) this.schedule(); } });
  }

  // The event under (x, y), or null.
  hit(x, y) {
    if (!this.data || !this.view) return null;
    const row = this.layout.find((r) => y >= r.y && y < r.y + r.h);
    if (!row || x < this.LABEL_W) return null;
    const t = row.track;
    const laneH = t.kind === 'gpu' ? row.h : this.LANE;
    const lane = Math.floor((y - row.y) / laneH);
    const scale = this.plotWidth() / (this.view.end - this.view.start);
    const time = this.view.start + (x - this.LABEL_W) / scale;
    const tol = 2 / scale;
    let best = null;
    for (const e of t.events) {
      if (e.lane !== lane) continue;
      const s = this.data.start_ns + e.t_ns;
      if (time >= s - tol && time <= s + e.dur_ns + tol) {
        if (!best || e.dur_ns < best.dur_ns) best = e;
      }
    }
    return best ? { e: best, track: t } : null;
  }

  hover(ev) {
    const rect = this.canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const y = ev.clientY - rect.top;
    const h = this.hit(x, y);
    if (!h) { this.hideTip(); return; }
    const d = this.data;
    const e = h.e;
    const name = d.names[e.name] || '';
    const start = d.start_ns + e.t_ns;
    const lines = [];
    if (e.count > 1) {
      lines.push(`${e.count} events (longest: ${name})`);
      lines.push(`span ${aisp.fmtNs(e.dur_ns)}, busy ${aisp.fmtNs(e.busy_ns || 0)}`);
      lines.push('zoom in to see them one by one');
    } else {
      lines.push(name);
      lines.push(`duration ${aisp.fmtNs(e.dur_ns)}`);
    }
    lines.push(`start ${(start / 1e9).toFixed(6)} s · ${h.track.label}`);
    if (e.launch) {
      const l = e.launch;
      const ls = d.start_ns + l.t_ns;
      lines.push(`launched by ${d.names[l.name] || 'a launch call'} on thread ${l.tid} at ${(ls / 1e9).toFixed(6)} s ` +
        `(call ${aisp.fmtNs(l.dur_ns)}, launch → start ${aisp.fmtNs(start - ls)})`);
    }
    this.tip.textContent = lines.join('\n');
    this.tip.hidden = false;
    const tw = this.tip.offsetWidth;
    const left = x + 14 + tw > rect.width ? Math.max(0, x - tw - 10) : x + 14;
    this.tip.style.left = left + 'px';
    this.tip.style.top = (y + 14) + 'px';
  }

  hideTip() { this.tip.hidden = true; }
}
