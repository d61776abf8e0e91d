// SandboxesView: the caller's sandboxes of the sandbox API (docs/sandbox-api.md): each with
// its state, shape and what its host says it uses now (memory peak, CPU time), paused,
// resumed and deleted from here; ended and deleted ones on request.
import {h, clear, runAction} from './dom.js';
import * as api from './api.js';

// "2026-12-05 09:00:00": a time in UTC, to the second.
const utc = (ms) => new Date(Number(ms)).toISOString().replace('T', ' ').slice(0, 19);
const mib = (bytes) => (Number(bytes) ? `${(Number(bytes) / 1048576).toFixed(1)} MiB` : '—');
const cpu = (ns) => (Number(ns) ? `${(Number(ns) / 1e9).toFixed(2)} s` : '—');
// How many sandboxes' live use is asked for at once.
const LIVE_AT_ONCE = 8;

export class SandboxesView {
  constructor() {
    this.tbody = h('tbody');
    this.info = h('p.info', {role: 'status'});
    this.ended = h('input', {type: 'checkbox', id: 'sb-ended', onchange: () => this.load()});
    this.el = h('section.sandboxes', {'aria-labelledby': 'sandboxes-h'},
      h('h2#sandboxes-h', 'Sandboxes'),
      h('p', 'Sandboxes made through the sandbox API (sinew sandbox, /v1/sandboxes). Use is what the host reports now. Times are shown in UTC.'),
      h('div.filters', this.ended, h('label', {for: 'sb-ended'}, 'Show ended and deleted'),
        h('button', {type: 'button', onclick: () => this.load()}, 'Refresh')),
      this.info,
      h('div.table-wrap', h('table.list',
        h('caption.visually-hidden', 'Sandboxes, newest first'),
        h('thead', h('tr', ['ID', 'State', 'Image', 'Runtime', 'CPU', 'Memory limit', 'Memory peak', 'CPU time',
          'Created (UTC)', 'Actions'].map((c) => h('th', {scope: 'col'}, c)))),
        this.tbody)));
  }

  // The section's data-state is "loading" until the list and its use are shown ("ready").
  async load() {
    this.el.dataset.state = 'loading';
    try {
      const all = [];
      let token = '';
      do {
        const q = new URLSearchParams({limit: '100'});
        if (this.ended.checked) q.set('include_ended', 'true');
        if (token) q.set('page_token', token);
        const page = await api.call('GET', `/v1/sandboxes?${q}`);
        all.push(...page.sandboxes);
        token = page.next_page_token;
      } while (token);
      this.render(all, new Map());
      this.render(all, await this.live(all));
    } catch (e) {
      this.error(e);
    }
    this.el.dataset.state = 'ready';
  }

  // What the hosts say of the sandboxes that still exist: id -> live.
  async live(sandboxes) {
    const out = new Map();
    const todo = sandboxes.filter((s) => s.state === 'ready' || s.state === 'paused');
    for (let i = 0; i < todo.length; i += LIVE_AT_ONCE) {
      await Promise.all(todo.slice(i, i + LIVE_AT_ONCE).map(async (s) => {
        try {
          const r = await api.call('GET', `/v1/sandboxes/${s.id}`);
          if (r.sandbox.live) out.set(s.id, r.sandbox.live);
        } catch (_) {
          // gone since the list, or its host does not answer: shown without use
        }
      }));
    }
    return out;
  }

  error(e) {
    this.info.textContent = e.message;
    this.info.classList.add('error');
  }

  act(method, path, done) {
    return runAction(this.info, () => api.call(method, path), done, () => this.load());
  }

  render(sandboxes, live) {
    if (!sandboxes.length) {
      clear(this.tbody, h('tr', h('td', {colspan: 10}, 'No sandboxes.')));
      return;
    }
    clear(this.tbody, sandboxes.map((s) => {
      const path = `/v1/sandboxes/${s.id}`;
      const r = s.resources || {};
      const use = live.get(s.id) || {};
      const actions = [];
      if (s.state === 'ready') {
        actions.push(h('button', {type: 'button', 'aria-label': `Pause sandbox ${s.id}`,
          onclick: () => this.act('POST', `${path}/pause`, `Paused ${s.id}.`)}, 'Pause'));
      }
      if (s.state === 'paused') {
        actions.push(h('button', {type: 'button', 'aria-label': `Resume sandbox ${s.id}`,
          onclick: () => this.act('POST', `${path}/resume`, `Resumed ${s.id}.`)}, 'Resume'));
      }
      if (s.state !== 'deleted') {
        actions.push(' ', h('button', {type: 'button', 'aria-label': `Delete sandbox ${s.id}`,
          onclick: () => this.act('DELETE', path, `Deleted ${s.id}.`)}, 'Delete'));
      }
      return h('tr', {'data-id': s.id},
        h('td', h('code', s.id)),
        h('td', s.reason && s.state !== 'ready' ? `${s.state}: ${s.reason}` : s.state),
        h('td', r.image || '—'), h('td', r.runtime || '—'),
        h('td', r.cpu_millis ? `${(Number(r.cpu_millis) / 1000).toFixed(2)} cores` : '—'),
        h('td', mib(r.memory_limit_bytes)), h('td.mem-peak', mib(use.memory_peak_bytes)),
        h('td.cpu-time', cpu(use.cpu_usage_ns)), h('td', utc(s.created_unix_ms)), h('td', actions));
    }));
  }
}
