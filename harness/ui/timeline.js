// Timeline: the session's model calls, tool calls and sandbox lifetimes as spans on one
// time axis (a canvas), with the harness's marks (status changes, errors, messages,
// take-overs). Keyboard: ←/→ previous/next item, ↑/↓ the nearest item on the lane above
// or below, Home/End, +/− zoom, 0 fit, Enter shows the item's event in the transcript.
import {h, fmtDuration, announce} from './dom.js';
import {LANES, nearestOnLane} from './model.js';

export const COLOURS = {
  ok: '#2e7d32', end_turn: '#1565c0', tool_use: '#00838f', max_tokens: '#b26a00', stop_sequence: '#1565c0',
  error: '#c62828', interrupted: '#e65100', timed_out: '#6a1b9a', lost: '#c62828', released: '#607d8b',
  cancelled: '#616161', open: '#9e9e9e', status: '#37474f', message: '#1565c0', takeover: '#e65100',
  summary: '#795548', sandbox: '#607d8b', note: '#795548', approval: '#b71c1c',
};
const LEGEND = [['ok', 'tool ok'], ['end_turn', 'model answered'], ['tool_use', 'model asked for tools'],
  ['error', 'error'], ['interrupted', 'interrupted'], ['timed_out', 'timed out'], ['open', 'running'],
  ['takeover', 'harness take-over']];

const NOTABLE = new Set(['error', 'interrupted', 'timed_out', 'lost', 'cancelled', 'max_tokens']);
const AXIS = 18;
const LANE = 24;

export class Timeline {
  // model: SessionModel; onSelect(item, {activate}) when the user picks an item.
  constructor(model, {onSelect, live = () => false, forkSeq = 0, label = 'Timeline'}) {
    this.model = model;
    this.onSelect = onSelect;
    this.live = live;
    this.forkSeq = forkSeq;
    this.selected = null;
    this.view = null;  // [t0, t1] when zoomed; null: fit the whole session
    this.drawn = -1;
    this.canvas = h('canvas', {'aria-hidden': 'true'});
    this.body = h('div.tl-body', {
      tabindex: 0, role: 'group',
      'aria-label': `${label}: model calls, tool calls, sandbox and harness lanes. Arrow keys move between items, Enter shows one in the transcript, plus and minus zoom, 0 fits.`,
      onkeydown: (e) => this.key(e),
    }, h('div.tl-lanes', {'aria-hidden': 'true'}, LANES.map((l) => h('div.tl-lane', l))), this.canvas);
    this.canvas.addEventListener('click', (e) => this.click(e));
    this.canvas.addEventListener('wheel', (e) => this.wheel(e), {passive: false});
    this.canvas.addEventListener('pointerdown', (e) => this.drag(e));
    const btn = (text, title, fn) => h('button.small', {type: 'button', title, onclick: fn}, text);
    this.el = h('section.timeline', {'aria-label': label},
      h('div.tl-toolbar',
        btn('+', 'Zoom in (+)', () => this.zoom(0.5)),
        btn('−', 'Zoom out (−)', () => this.zoom(2)),
        btn('Fit', 'Show the whole session (0)', () => this.fit()),
        h('span.tl-range'),
        h('ul.legend', {'aria-label': 'Colours'}, LEGEND.map(([k, text]) =>
          h('li', h('span.swatch', {'data-colour': k}), text)))),
      this.body,
      h('p.tl-selected', {'aria-hidden': 'true'}, 'Select a span: click it, or focus the timeline and use the arrow keys.'));
    for (const s of this.el.querySelectorAll('.swatch')) s.style.background = COLOURS[s.dataset.colour];
    this.resize = new ResizeObserver(() => this.draw(true));
    this.resize.observe(this.body);
  }

  range() {
    const m = this.model;
    const end = this.live() ? Math.max(m.lastTs, Date.now()) : m.lastTs;
    const t0 = m.firstTs || Date.now();
    const t1 = Math.max(end, t0 + 1);
    return this.view || [t0, t1 + (t1 - t0) * 0.02];
  }

  draw(force = false) {
    if (!force && this.drawn === this.model.version && !this.live()) return;
    this.drawn = this.model.version;
    const width = Math.max(200, this.canvas.clientWidth || this.body.clientWidth - 80);
    const height = AXIS + LANE * LANES.length + 4;
    const dpr = window.devicePixelRatio || 1;
    if (this.canvas.width !== Math.round(width * dpr) || this.canvas.height !== Math.round(height * dpr)) {
      this.canvas.width = Math.round(width * dpr);
      this.canvas.height = Math.round(height * dpr);
      this.canvas.style.height = `${height}px`;
    }
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const [t0, t1] = this.range();
    const x = (t) => ((t - t0) / (t1 - t0)) * width;
    this.x = x;
    this.width = width;
    // Axis: about one tick per 100 px.
    ctx.fillStyle = '#444';
    ctx.font = '11px system-ui, sans-serif';
    const step = niceStep((t1 - t0) / Math.max(1, width / 100));
    for (let t = Math.ceil((t0 - this.model.firstTs) / step) * step + this.model.firstTs; t <= t1; t += step) {
      const px = x(t);
      ctx.fillRect(px, AXIS - 4, 1, 4);
      ctx.fillText(`+${fmtDuration(t - this.model.firstTs)}`, px + 2, 11);
    }
    for (let l = 0; l < LANES.length; l++) {
      ctx.fillStyle = l % 2 ? '#f6f7f9' : '#eceff3';
      ctx.fillRect(0, AXIS + l * LANE, width, LANE);
    }
    const now = Date.now();
    // Two passes: failures last, so that a zoomed-out view still shows them on top.
    for (const notable of [false, true]) {
      for (const s of this.model.spans) {
        if (NOTABLE.has(s.outcome) !== notable) continue;
        const end = s.open ? (this.live() ? now : this.model.lastTs) : s.end;
        if (end < t0 || s.start > t1) continue;
        const a = x(s.start);
        const w = Math.max(2, x(end) - a);
        ctx.fillStyle = COLOURS[s.outcome] || '#777';
        ctx.fillRect(a, AXIS + s.lane * LANE + 4, w, LANE - 8);
      }
    }
    for (const m of this.model.marks) {
      if (m.start < t0 || m.start > t1) continue;
      const px = x(m.start);
      ctx.fillStyle = COLOURS[m.kind] || '#555';
      ctx.beginPath();
      const cy = AXIS + 3 * LANE + LANE / 2;
      ctx.moveTo(px, cy - 7);
      ctx.lineTo(px + 5, cy);
      ctx.lineTo(px, cy + 7);
      ctx.lineTo(px - 5, cy);
      ctx.fill();
      if (m.kind === 'takeover') ctx.fillRect(px - 1, AXIS, 2, LANE * 3);
    }
    if (this.forkSeq) {
      const ev = this.model.get(this.forkSeq);
      if (ev) {
        const px = x(ev.ts);
        ctx.strokeStyle = '#d81b60';
        ctx.setLineDash([4, 3]);
        ctx.beginPath();
        ctx.moveTo(px, AXIS);
        ctx.lineTo(px, height);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = '#d81b60';
        ctx.fillText(`fork at #${this.forkSeq}`, px + 3, AXIS + 10);
      }
    }
    if (this.selected) {
      const s = this.selected;
      const end = s.open ? (this.live() ? now : this.model.lastTs) : s.end;
      ctx.strokeStyle = '#000';
      ctx.lineWidth = 2;
      ctx.strokeRect(x(s.start) - 3, AXIS + s.lane * LANE + 1, Math.max(6, x(end) - x(s.start) + 6), LANE - 2);
      ctx.lineWidth = 1;
    }
    this.body.dataset.spans = String(this.model.spans.length);
    this.body.dataset.marks = String(this.model.marks.length);
    this.el.querySelector('.tl-range').textContent = `${fmtDuration(t1 - t0)} shown`;
  }

  // Selects the item that starts or ends at event `seq` (from the transcript or a link).
  selectSeq(seq, {scroll = true} = {}) {
    const item = this.model.items.find((it) => it.seq === seq || it.endSeq === seq || it.resultSeq === seq);
    if (item) this.select(item, {notify: false, scroll});
  }

  select(item, {notify = true, activate = false, scroll = true} = {}) {
    if (!item) return;
    this.selected = item;
    this.body.dataset.selectedSeq = String(item.seq);
    const text = describe(item);
    this.el.querySelector('.tl-selected').textContent = text;
    if (notify) announce(text);
    if (scroll && this.view) {
      const [t0, t1] = this.view;
      if (item.start < t0 || item.start > t1) {
        const w = t1 - t0;
        this.view = [item.start - w / 2, item.start + w / 2];
      }
    }
    this.draw(true);
    if (notify && this.onSelect) this.onSelect(item, {activate});
  }

  key(e) {
    const items = this.model.items;
    if (!items.length) return;
    const i = this.selected ? items.indexOf(this.selected) : -1;
    let next = null;
    switch (e.key) {
      case 'ArrowRight': next = items[Math.min(items.length - 1, i + 1)]; break;
      case 'ArrowLeft': next = items[Math.max(0, i - 1)]; break;
      case 'Home': next = items[0]; break;
      case 'End': next = items[items.length - 1]; break;
      case 'ArrowUp':
      case 'ArrowDown': {
        const cur = this.selected || items[0];
        const dir = e.key === 'ArrowUp' ? -1 : 1;
        for (let lane = cur.lane + dir; lane >= 0 && lane < LANES.length && !next; lane += dir) {
          next = nearestOnLane(items, lane, (cur.start + cur.end) / 2);
        }
        if (!next) next = cur;
        break;
      }
      case '+': case '=': this.zoom(0.5); break;
      case '-': this.zoom(2); break;
      case '0': this.fit(); break;
      case 'Enter':
        if (this.selected) this.onSelect(this.selected, {activate: true});
        break;
      default: return;
    }
    e.preventDefault();
    if (next) this.select(next);
  }

  zoom(factor, at) {
    const [t0, t1] = this.range();
    const c = at ?? (this.selected ? this.selected.start : (t0 + t1) / 2);
    const w = Math.max(2, (t1 - t0) * factor);
    const f = (c - t0) / (t1 - t0);
    this.view = [c - w * f, c + w * (1 - f)];
    this.draw(true);
  }

  fit() {
    this.view = null;
    this.draw(true);
  }

  click(e) {
    const rect = this.canvas.getBoundingClientRect();
    const px = e.clientX - rect.left;
    const lane = Math.floor((e.clientY - rect.top - AXIS) / LANE);
    if (lane < 0 || lane >= LANES.length) return;
    const [t0, t1] = this.range();
    const t = t0 + (px / this.width) * (t1 - t0);
    const slack = (6 / this.width) * (t1 - t0);
    const hit = nearestOnLane(this.model.items, lane, t);
    if (hit && hit.start - slack <= t && t <= (hit.open ? Infinity : hit.end) + slack) this.select(hit, {activate: true});
  }

  wheel(e) {
    e.preventDefault();
    const rect = this.canvas.getBoundingClientRect();
    const [t0, t1] = this.range();
    this.zoom(e.deltaY > 0 ? 1.25 : 0.8, t0 + ((e.clientX - rect.left) / this.width) * (t1 - t0));
  }

  drag(e) {
    const startX = e.clientX;
    const [t0, t1] = this.range();
    let moved = false;
    const move = (m) => {
      const dx = m.clientX - startX;
      if (Math.abs(dx) < 3 && !moved) return;
      moved = true;
      const dt = (dx / this.width) * (t1 - t0);
      this.view = [t0 - dt, t1 - dt];
      this.draw(true);
    };
    const up = () => {
      window.removeEventListener('pointermove', move);
      window.removeEventListener('pointerup', up);
    };
    window.addEventListener('pointermove', move);
    window.addEventListener('pointerup', up);
  }

  destroy() {
    this.resize.disconnect();
  }
}

export function describe(item) {
  const lane = LANES[item.lane];
  if (item.mark) return `${lane}: ${item.label} (event ${item.seq})`;
  const dur = item.open ? 'running' : fmtDuration(item.end - item.start);
  return `${lane}: ${item.label}, ${dur}, ${item.outcome}${item.detail ? ` (${item.detail})` : ''} (event ${item.seq}${item.endSeq ? `–${item.endSeq}` : ''})`;
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
  for (const m of [1, 2, 5, 10]) if (p * m >= raw) return p * m;
  return p * 10;
}
