// DOM helpers. The console never parses HTML strings (the page's CSP refuses string
// sinks): every node is made here, text goes in as text.

// h('div.cls#id', {attr: v, onclick: fn}, child, ...): an element. Children may be
// strings, nodes, arrays, or null/false (skipped).
export function h(tag, attrs, ...children) {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(tag);
  const name = m ? m[1] : tag;
  const svg = SVG_TAGS.has(name);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', name) : document.createElement(name);
  if (m && m[2]) {
    for (const part of m[2].match(/[.#][\w-]+/g)) {
      if (part[0] === '.') el.classList.add(part.slice(1));
      else el.id = part.slice(1);
    }
  }
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && !svg) el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

const SVG_TAGS = new Set(['svg', 'g', 'rect', 'path', 'line', 'text', 'title', 'circle']);

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// Empties `el`, then appends `children` as h() does (nulls skipped, arrays flattened).
export function clear(el, ...children) {
  while (el.firstChild) el.firstChild.remove();
  return append(el, children);
}

export function fmtInt(n) {
  return Number(n || 0).toLocaleString('en-US');
}

export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function fmtDuration(ms) {
  if (!isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function fmtAge(unixMs, now = Date.now()) {
  const s = Math.max(0, Math.round((now - unixMs) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function fmtClock(unixMs) {
  const d = new Date(Number(unixMs));
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// The first line of `text`, cut to `max` characters.
export function firstLine(text, max = 160) {
  const s = String(text || '').replace(/\s+/g, ' ').trim();
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}

// Announces `text` to screen readers through the page's live region.
export function announce(text) {
  const live = document.getElementById('live');
  if (live) live.textContent = text;
}

// A page's action from a button: runs `action` (an API call); then `info` says `done`
// (also announced) and `reload` runs, or `info` shows the error.
export async function runAction(info, action, done, reload) {
  try {
    await action();
    info.classList.remove('error');
    info.textContent = done;
    announce(done);
    await reload();
  } catch (e) {
    info.textContent = e.message;
    info.classList.add('error');
  }
}
