// SessionsView: the caller's sessions, newest first, a page at a time (the API pages,
// so 100,000 sessions cost what 50 do), filtered by status on the server and searched in
// the browser: the page at once, or every page on request, scanning until enough match.
// Model and tokens are not in the session record: they are read from each shown row's
// events (event 1 for the model; the model responses for tokens, up to 5,000 events).
import {h, clear, fmtInt, fmtAge} from './dom.js';
import * as api from './api.js';
import {payload, num} from './model.js';

const STATUSES = ['queued', 'running', 'requires_action', 'waiting_for_input', 'completed', 'failed', 'cancelled'];
const TOKEN_SCAN_EVENTS = 5000;
const enrichCache = new Map();  // id:next_seq -> {model, tokens, partial}

export class SessionsView {
  // params: URLSearchParams of the route (status, q, limit).
  constructor(params) {
    this.status = params.get('status') || '';
    this.query = params.get('q') || '';
    this.limit = Number(params.get('limit')) || 50;
    this.tokens = [''];  // page tokens of the pages seen (index = page number)
    this.page = 0;
    this.sessions = [];
    this.next = '';
    this.abort = new AbortController();
    this.scan = null;
    this.tbody = h('tbody');
    this.info = h('p.info', {role: 'status'});
    const statusSel = h('select', {id: 'f-status', name: 'status', onchange: (e) => this.setFilter({status: e.target.value})},
      h('option', {value: ''}, 'any'), STATUSES.map((s) => h('option', {value: s, selected: s === this.status}, s)));
    const limitSel = h('select', {id: 'f-limit', name: 'limit', onchange: (e) => this.setFilter({limit: e.target.value})},
      [25, 50, 100, 500, 1000].map((n) => h('option', {value: n, selected: n === this.limit}, String(n))));
    this.search = h('input', {id: 'f-q', type: 'search', name: 'q', value: this.query, placeholder: 'title, id, model or metadata',
      oninput: (e) => {
        this.query = e.target.value;
        this.replaceRoute();
        this.renderRows();
      }});
    this.scanButton = h('button', {type: 'button', onclick: () => this.toggleScan()}, 'Search all pages');
    this.prev = h('button', {type: 'button', onclick: () => this.go(this.page - 1)}, '← Newer');
    this.nextBtn = h('button', {type: 'button', onclick: () => this.go(this.page + 1)}, 'Older →');
    this.el = h('section.sessions', {'aria-labelledby': 'sessions-h'},
      h('h2#sessions-h', 'Sessions'),
      h('form.filters', {role: 'search', onsubmit: (e) => e.preventDefault()},
        h('label', {for: 'f-status'}, 'Status'), statusSel,
        h('label', {for: 'f-q'}, 'Search'), this.search, this.scanButton,
        h('label', {for: 'f-limit'}, 'Per page'), limitSel,
        h('button', {type: 'button', onclick: () => this.go(this.page)}, 'Refresh')),
      this.info,
      h('div.table-wrap', h('table.list',
        h('caption.visually-hidden', 'Sessions, newest first'),
        h('thead', h('tr', ['Status', 'Title', 'Model', 'Age', 'Events', 'Tokens (in / out)', 'Id'].map((c) => h('th', {scope: 'col'}, c)))),
        this.tbody)),
      h('nav.pager', {'aria-label': 'Pages'}, this.prev, h('span.page-no'), this.nextBtn));
    this.refresh = setInterval(() => {
      // The first page refreshes, unless someone is moving through the table's links.
      const inTable = document.activeElement && document.activeElement.closest && document.activeElement.closest('table.list');
      if (this.page === 0 && !this.scan && !inTable && document.visibilityState === 'visible') this.go(0, {quiet: true});
    }, 5000);
  }

  setFilter(change) {
    if ('status' in change) this.status = change.status;
    if ('limit' in change) this.limit = Number(change.limit);
    this.tokens = [''];
    this.stopScan();
    this.replaceRoute();
    this.go(0);
  }

  replaceRoute() {
    const q = new URLSearchParams();
    if (this.status) q.set('status', this.status);
    if (this.query) q.set('q', this.query);
    if (this.limit !== 50) q.set('limit', String(this.limit));
    const s = q.toString();
    history.replaceState(null, '', `#/sessions${s ? `?${s}` : ''}`);
  }

  async go(page, {quiet = false} = {}) {
    if (page < 0 || page >= this.tokens.length) return;
    if (!quiet) this.info.textContent = 'Loading…';
    try {
      // With a status filter the store scans a bounded number of sessions per call, so a
      // page can come back short with more to come: read on until the page is full.
      let res = await api.listSessions({status: this.status, limit: this.limit, pageToken: this.tokens[page]},
        {signal: this.abort.signal});
      const sessions = res.sessions;
      for (let round = 0; round < 20 && sessions.length < this.limit && res.next_page_token; round++) {
        res = await api.listSessions({status: this.status, limit: this.limit - sessions.length, pageToken: res.next_page_token},
          {signal: this.abort.signal});
        sessions.push(...res.sessions);
      }
      this.page = page;
      this.sessions = sessions;
      this.next = res.next_page_token;
      if (this.next) this.tokens[page + 1] = this.next;
      this.tokens.length = this.next ? page + 2 : page + 1;
      this.renderRows();
      this.el.dataset.loaded = 'true';
    } catch (e) {
      if (e.name === 'AbortError') return;
      this.info.textContent = `Could not list sessions: ${e.message}`;
    }
  }

  matches(s) {
    const q = this.query.trim().toLowerCase();
    if (!q) return true;
    const e = enrichCache.get(`${s.id}:${s.next_seq}`);
    const hay = [s.title, s.id, s.status, e && e.model, ...Object.entries(s.metadata || {}).map(([k, v]) => `${k}=${v}`)]
      .join(' ').toLowerCase();
    return hay.includes(q);
  }

  renderRows() {
    const list = this.scan ? this.scan.found : this.sessions.filter((s) => this.matches(s));
    clear(this.tbody);
    const now = Date.now();
    for (const s of list) {
      const model = h('td.model', '…');
      const tokens = h('td.num', '…');
      this.tbody.append(h('tr', {dataset: {id: s.id}},
        h('td', h('span', {class: `status st-${s.status}`}, s.status)),
        h('td', h('a', {href: `#/s/${s.id}`}, s.title || '(untitled)'),
          s.forked_from_session ? h('span.tag', ` fork of ${s.forked_from_session.slice(0, 8)}`) : null,
          s.parent_session_id ? h('span.tag', ` sub-agent of ${s.parent_session_id.slice(0, 8)}`) : null,
          Object.keys(s.metadata || {}).length ? h('span.tag', ` ${Object.entries(s.metadata).map(([k, v]) => `${k}=${v}`).join(' ')}`) : null),
        model, h('td', {title: new Date(num(s.created_unix_ms)).toISOString()}, fmtAge(num(s.created_unix_ms), now)),
        h('td.num', fmtInt(num(s.next_seq) - 1)), tokens, h('td', h('code', s.id.slice(0, 12)))));
      this.enrich(s, model, tokens);
    }
    const shown = list.length;
    if (this.scan) {
      this.info.textContent = `${this.scan.done ? 'Searched' : 'Searching'} every page: ${fmtInt(this.scan.scanned)} sessions read, ${fmtInt(shown)} match${this.scan.done ? '' : '…'}`;
    } else {
      this.info.textContent = `Page ${this.page + 1}: ${fmtInt(this.sessions.length)} sessions${this.query ? `, ${shown} match "${this.query}" (this page; "Search all pages" reads them all)` : ''}${this.status ? ` with status ${this.status}` : ''}.`;
    }
    this.el.querySelector('.page-no').textContent = `page ${this.page + 1}`;
    this.prev.disabled = this.page === 0 || !!this.scan;
    this.nextBtn.disabled = !this.next || !!this.scan;
    if (!shown) this.tbody.append(h('tr', h('td', {colspan: 7}, 'No sessions.')));
  }

  // Model and tokens of one row, read from its events; at most 4 sessions at once.
  enrich(s, modelCell, tokensCell) {
    const key = `${s.id}:${s.next_seq}`;
    const show = (e) => {
      modelCell.textContent = e.model || '—';
      tokensCell.textContent = e.tokens === null ? '—'
        : `${e.partial ? '≥ ' : ''}${fmtInt(e.tokens.prompt)} / ${fmtInt(e.tokens.completion)}`;
      if (e.partial) tokensCell.title = `counted over the first ${fmtInt(TOKEN_SCAN_EVENTS)} events`;
    };
    if (enrichCache.has(key)) return show(enrichCache.get(key));
    queue(async () => {
      if (this.abort.signal.aborted || !modelCell.isConnected) return;
      const e = {model: '', tokens: {prompt: 0, completion: 0}, partial: false};
      let after = 0;
      const total = num(s.next_seq) - 1;
      while (after < Math.min(total, TOKEN_SCAN_EVENTS)) {
        const page = await api.getEvents(s.id, after, 1000, {signal: this.abort.signal});
        if (!page.events.length) break;
        for (const ev of page.events) {
          const p = payload(ev);
          if (ev.type === 'session_created') {
            try {
              e.model = JSON.parse(p.task_json || '{}').model || '';
            } catch (_) { /* keep empty */ }
          }
          if (ev.type === 'model_request' && !e.model) e.model = p.model || '';
          if (ev.type === 'model_response') {
            e.tokens.prompt += num((p.usage || {}).prompt_tokens);
            e.tokens.completion += num((p.usage || {}).completion_tokens);
          }
        }
        after = num(page.events[page.events.length - 1].seq);
      }
      e.partial = after < total;
      enrichCache.set(key, e);
      show(e);
    });
  }

  toggleScan() {
    if (this.scan && !this.scan.done) return this.stopScan();
    if (this.scan) {
      this.stopScan();
      return this.renderRows();
    }
    this.scanAll();
  }

  stopScan() {
    if (this.scan) this.scan.stopped = true;
    this.scan = null;
    this.scanButton.textContent = 'Search all pages';
  }

  async scanAll() {
    const scan = {found: [], scanned: 0, done: false, stopped: false};
    this.scan = scan;
    this.scanButton.textContent = 'Stop';
    let token = '';
    do {
      let res;
      try {
        res = await api.listSessions({status: this.status, limit: 1000, pageToken: token}, {signal: this.abort.signal});
      } catch (e) {
        if (e.name !== 'AbortError') this.info.textContent = `Search stopped: ${e.message}`;
        return;
      }
      if (scan.stopped) return;
      scan.scanned += res.sessions.length;
      for (const s of res.sessions) if (this.matches(s) && scan.found.length < 1000) scan.found.push(s);
      token = res.next_page_token;
      this.renderRows();
    } while (token && scan.found.length < 1000);
    scan.done = true;
    this.scanButton.textContent = 'Back to pages';
    this.renderRows();
  }

  load() {
    return this.go(0);
  }

  destroy() {
    this.abort.abort();
    clearInterval(this.refresh);
    if (this.scan) this.scan.stopped = true;
  }
}

// A small queue: at most 4 enrichment reads at once.
const waiting = [];
let running = 0;
function queue(job) {
  waiting.push(job);
  pump();
}
function pump() {
  while (running < 4 && waiting.length) {
    const job = waiting.shift();
    running++;
    job().catch(() => {}).finally(() => {
      running--;
      pump();
    });
  }
}
