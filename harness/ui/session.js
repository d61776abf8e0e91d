// SessionView: one session: header and actions, the timeline, tokens per turn, the
// transcript with the selected event, and the files its tools wrote. Loads the log page
// by page (the first page is drawn at once, the rest follow in the background) and then
// follows the event stream, resuming with Last-Event-ID after any break.
import {h, clear, fmtInt, fmtAge, fmtBytes, announce} from './dom.js';
import * as api from './api.js';
import {SessionModel, num} from './model.js';
import {Timeline, COLOURS} from './timeline.js';
import {Transcript, diffView} from './transcript.js';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const FIRST_PAGE = 200;
const PAGE = 1000;
const PAGE_BYTES = 4 * 1024 * 1024;  // a page larger than this halves the next one
const FILE_CHANGES_SHOWN = 50;        // per file in the Files panel

export class SessionView {
  // opts: {compact, forkSeq, seq (event to select), label, onFork(view, fork, atSeq)}
  constructor(id, opts = {}) {
    this.id = id;
    this.opts = opts;
    this.model = new SessionModel();
    this.session = null;
    this.abort = new AbortController();
    this.streaming = false;
    this.conn = h('span.conn', {dataset: {state: 'loading'}, role: 'status'}, 'loading…');
    this.live = () => this.streaming && !TERMINAL.has(this.status());
    this.timeline = new Timeline(this.model, {
      live: this.live, forkSeq: opts.forkSeq || 0, label: `Timeline of ${opts.label || 'the session'}`,
      onSelect: (item, {activate}) => {
        const seq = item.seq;
        this.transcript.select(seq, {focus: activate});
        this.remember(seq);
      },
    });
    this.transcript = new Transcript(this.model, {
      sessionId: id, forkSeq: opts.forkSeq || 0, label: `Transcript of ${opts.label || 'the session'}`,
      onSelect: (seq) => {
        this.timeline.selectSeq(seq);
        this.remember(seq);
      },
    });
    this.header = h('div.s-header');
    this.tokens = h('div.tokens');
    this.files = h('div.files');
    this.actions = h('div.actions');
    this.el = h(`article.session${opts.compact ? '.compact' : ''}`, {'aria-label': opts.label || 'Session', dataset: {id}},
      this.header, this.actions, this.timeline.el,
      h('details.panel', {open: !opts.compact}, h('summary', 'Tokens per turn'), this.tokens),
      this.transcript.el,
      h('details.panel', {open: !opts.compact}, h('summary', 'Files written or edited'), this.files));
    this.drawScheduled = false;
    this.tick = setInterval(() => {
      if (this.live()) this.timeline.draw(true);
    }, 1000);
  }

  status() {
    return this.model.status || (this.session && this.session.status) || '';
  }

  remember(seq) {
    this.selectedSeq = seq;
    if (this.opts.compact) return;
    history.replaceState(null, '', `#/s/${this.id}/${seq}`);
    if (this.forkButton) this.forkButton.textContent = `Fork at #${seq}`;
  }

  async load() {
    // The record and the first page are asked for together.
    let firstPage = this.fetchPage(0, FIRST_PAGE);
    firstPage.catch(() => {});
    try {
      this.session = await api.getSession(this.id, {signal: this.abort.signal});
    } catch (e) {
      if (e.name === 'AbortError') return;
      clear(this.el, h('p.error', {role: 'alert'}, e.status === 404
        ? `No session ${this.id} for this API key (it may be in another harness's store).`
        : `Could not load the session: ${e.message}`));
      return;
    }
    this.renderHeader();
    this.renderActions();
    let after = 0;
    let limit = FIRST_PAGE;
    let first = true;
    const target = this.opts.seq || 0;
    for (;;) {
      let page;
      try {
        page = await (firstPage || this.fetchPage(after, limit));
      } catch (e) {
        firstPage = null;
        if (e.name === 'AbortError') return;
        this.setConn('error', `loading failed: ${e.message}; retrying`);
        await sleep(1000, this.abort.signal).catch(() => {});
        if (this.abort.signal.aborted) return;
        continue;
      }
      firstPage = null;
      this.model.add(page.events, page.bytes);
      after = this.model.lastSeq;
      if (first) {
        first = false;
        performance.mark(`sinew-first-page-${this.id}`);
        this.drawNow();
        this.firstRender();
      } else {
        this.schedule();
      }
      if (target && this.model.get(target) && this.transcript.selected !== target) {
        this.transcript.select(target);
        this.timeline.selectSeq(target);
      }
      limit = page.bytes > PAGE_BYTES ? Math.max(10, limit >> 1) : PAGE;
      if (!page.events.length || after + 1 >= num(page.next_seq)) break;
      this.setConn('loading', `loading… ${fmtInt(after)} of ${fmtInt(num(page.next_seq) - 1)} events`);
      // Let the page handle input between pages.
      await new Promise((r) => setTimeout(r, 0));
    }
    this.el.dataset.loaded = 'true';
    this.drawNow();
    this.follow();
  }

  async fetchPage(after, limit) {
    const t = performance.now();
    const res = await fetch(`/v1/sessions/${this.id}/events?after=${after}&limit=${limit}`, {
      headers: {Authorization: `Bearer ${api.apiKey()}`}, signal: this.abort.signal, cache: 'no-store'});
    if (!res.ok) throw new api.ApiError(res.status, 'http', `HTTP ${res.status}`);
    const text = await res.text();
    const page = JSON.parse(text);
    page.bytes = text.length;
    page.ms = performance.now() - t;
    return page;
  }

  firstRender() {
    performance.mark(`sinew-first-render-${this.id}`);
    this.el.dataset.firstRender = 'true';
    // Interactive: the first page is drawn and the main thread is free again.
    requestAnimationFrame(() => setTimeout(() => {
      performance.mark(`sinew-interactive-${this.id}`);
      this.el.dataset.interactive = 'true';
    }, 0));
  }

  // Follows the event stream while the session may still change; reconnects (with
  // Last-Event-ID = the last event held) after a network failure or a harness restart.
  async follow() {
    if (this.following) return;
    this.following = true;
    let wait = 250;
    let attempt = 0;
    while (!this.abort.signal.aborted) {
      if (TERMINAL.has(this.status()) && this.model.lastSeq + 1 >= num(this.session.next_seq)) {
        this.streaming = false;
        this.setConn('ended', `${this.status()}; ${fmtInt(this.model.lastSeq)} events`);
        break;
      }
      try {
        this.streaming = true;
        this.setConn('live', attempt ? 'live again (reconnected)' : 'live');
        await api.streamEvents(this.id, this.model.lastSeq, (ev, bytes) => {
          this.model.add([ev], bytes);
          wait = 250;
          this.schedule();
        }, this.abort.signal);
        this.session = await api.getSession(this.id, {signal: this.abort.signal});
      } catch (e) {
        if (e.name === 'AbortError' || this.abort.signal.aborted) break;
        attempt++;
        this.streaming = false;
        this.setConn('reconnecting', `connection lost (${e.message}); reconnecting, attempt ${attempt}…`);
        await sleep(wait, this.abort.signal).catch(() => {});
        wait = Math.min(4000, wait * 2);
        try {
          this.session = await api.getSession(this.id, {signal: this.abort.signal});
        } catch (_) {
          // still away: the loop tries again
        }
      }
    }
    this.following = false;
    this.streaming = false;
    this.drawNow();
  }

  setConn(state, text) {
    this.conn.dataset.state = state;
    this.conn.textContent = text;
  }

  schedule() {
    if (this.drawScheduled) return;
    this.drawScheduled = true;
    requestAnimationFrame(() => {
      this.drawScheduled = false;
      this.drawNow();
    });
  }

  drawNow() {
    this.timeline.draw();
    this.transcript.render();
    this.renderHeader();
    const now = performance.now();
    if (!this.lastSlow || now - this.lastSlow > 500 || this.el.dataset.loaded) {
      this.lastSlow = now;
      this.renderTokens();
      this.renderFiles();
    }
    if (!this.transcript.selected && this.model.lastSeq && !this.opts.seq) {
      // Nothing chosen yet: show the first event.
      this.transcript.select(1);
    }
    if (this.cancelButton) this.cancelButton.disabled = TERMINAL.has(this.status());
    if (this.closeButton) this.closeButton.hidden = this.status() !== 'waiting_for_input';
    if (this.interruptForm) this.interruptForm.hidden = TERMINAL.has(this.status());
    this.renderApprovals();
    this.el.dataset.events = String(this.model.lastSeq);
    this.el.dataset.status = this.status();
  }

  renderHeader() {
    const s = this.session;
    if (!s) return;
    const m = this.model;
    const status = this.status();
    const model = (m.task && m.task.model) || [...m.models][0] || 'default model';
    clear(this.header, 
      h(this.opts.compact ? 'h3' : 'h2', this.opts.compact && this.opts.label ? `${this.opts.label[0].toUpperCase()}${this.opts.label.slice(1)}: ` : '', s.title || '(untitled)'),
      h('p.meta',
        h('span', {class: `status st-${status}`}, status), ' · ', model, ' · ',
        h('code', s.id), ' · created ', fmtAge(num(s.created_unix_ms)), ' · ',
        `${fmtInt(m.lastSeq)} events (${fmtBytes(m.bytes)})`, ' · ',
        `${fmtInt(m.tokens.prompt)} tokens in, ${fmtInt(m.tokens.completion)} out over ${fmtInt(m.turns.length)} turns`,
        ' · ', this.conn),
      s.forked_from_session ? h('p.meta', 'Fork of ', h('a', {href: `#/compare/${s.forked_from_session}/${s.id}/${num(s.forked_at_seq)}`},
        `${s.forked_from_session.slice(0, 12)}… at event #${num(s.forked_at_seq)}`), ' (compare)') : null,
      // Sub-agents (docs/harness.md, "Sub-agents"): the parent up, the children down.
      s.parent_session_id ? h('p.meta.parent', 'Sub-agent of ', h('a', {href: `#/s/${s.parent_session_id}`},
        `${s.parent_session_id.slice(0, 12)}…`), ` (call ${s.parent_call_id || ''})`) : null,
      (s.children || []).length ? h('p.meta.children', 'Sub-agents: ', ...s.children.flatMap((c, i) => [
        i ? ', ' : '', h('a', {href: `#/s/${c.session_id}`}, `${c.session_id.slice(0, 12)}…`), ` (${c.call_id})`])) : null);
  }

  // The tool calls that wait for a decision, each with Approve and Deny (and a message for
  // the model); redrawn only when the set of waiting calls changes.
  renderApprovals() {
    if (!this.approvalsBox) return;
    const waiting = TERMINAL.has(this.status()) ? [] : [...this.model.approvals.values()];
    const key = waiting.map((a) => a.call_id).join('\n');
    if (key === this.approvalsKey) return;
    this.approvalsKey = key;
    if (!waiting.length) {
      clear(this.approvalsBox);
      this.approvalsBox.hidden = true;
      return;
    }
    const result = h('p.result', {role: 'status'});
    const items = waiting.map((a) => {
      const msgId = `approval-msg-${this.id.slice(0, 8)}-${a.seq}`;
      const message = h('input', {id: msgId, name: 'message', placeholder: 'optional message for the model'});
      const answer = (decision) => async () => {
        try {
          await api.decide(this.id, a.call_id, decision, message.value.trim());
          result.textContent = `${decision === 'approve' ? 'Approved' : 'Denied'} ${a.call_id}.`;
          result.classList.remove('error');
        } catch (e) {
          result.textContent = `Failed: ${e.message}`;
          result.classList.add('error');
        }
        announce(result.textContent);
      };
      return h('li', {dataset: {callId: a.call_id}},
        h('strong', a.tool_name || 'tool'), ' ', h('code', a.input_json || ''), ' ', h('span.muted', a.reason || ''), ' ',
        h('label', {for: msgId}, 'Message'), message,
        h('button', {type: 'button', dataset: {action: 'approve'}, onclick: answer('approve')}, 'Approve'),
        h('button', {type: 'button', dataset: {action: 'deny'}, onclick: answer('deny')}, 'Deny'));
    });
    this.approvalsBox.hidden = false;
    clear(this.approvalsBox, h('h3', `Waiting for a decision (${waiting.length})`), h('ul', items), result);
  }

  renderActions() {
    if (!this.session) return;
    const terminal = TERMINAL.has(this.status());
    const result = h('p.result', {role: 'status'});
    const run = async (fn, done) => {
      try {
        const out = await fn();
        result.textContent = done(out);
        announce(result.textContent);
      } catch (e) {
        result.textContent = `Failed: ${e.message}`;
        result.classList.add('error');
      }
    };
    const msgId = `msg-${this.id.slice(0, 8)}`;
    const text = h('textarea', {id: msgId, rows: 2, name: 'message'});
    const messageForm = h('form.inline.message', {
      onsubmit: (e) => {
        e.preventDefault();
        if (!text.value.trim()) return;
        run(() => api.sendMessage(this.id, text.value), () => {
          text.value = '';
          this.session.status = 'queued';
          this.model.status = '';
          this.follow();
          return 'Message sent; the session continues.';
        });
      },
    }, h('label', {for: msgId}, 'Message'), text, h('button', {type: 'submit'}, 'Send'));
    const seq = this.selectedSeq || this.transcript.selected || this.model.lastSeq;
    const forkModelId = `fork-model-${this.id.slice(0, 8)}`;
    const forkMsgId = `fork-msg-${this.id.slice(0, 8)}`;
    const forkModel = h('input', {id: forkModelId, name: 'model', list: `models-${this.id.slice(0, 8)}`, placeholder: 'same model'});
    const forkMsg = h('input', {id: forkMsgId, name: 'message', placeholder: 'optional message after the fork point'});
    const forkCountId = `fork-count-${this.id.slice(0, 8)}`;
    const forkCount = h('input', {id: forkCountId, name: 'count', type: 'number', min: 1, max: 16, value: 1, size: 3});
    const forkForm = h('form.inline.fork', {
      onsubmit: (e) => {
        e.preventDefault();
        const at = this.selectedSeq || this.transcript.selected;
        if (!at) {
          result.textContent = 'Select the event to fork at first.';
          return;
        }
        const n = Number(forkCount.value) || 1;
        run(() => api.forkSession(this.id, at, forkModel.value.trim(), forkMsg.value.trim(), n), (forked) => {
          const ids = forked.sessions.map((f) => f.id);
          const sandbox = !forked.sandbox ? ''
            : forked.sandbox.from_snapshot ? `; each sandbox from snapshot ${forked.sandbox.from_snapshot}`
              : '; no snapshot of its sandbox was kept by then: each gets a fresh one';
          location.hash = `#/compare/${this.id}/${ids[0]}/${at}`;
          return `Forked at event #${at}: ${ids.join(', ')}${sandbox}`;
        });
      },
    },
    h('label', {for: forkModelId}, 'Model'), forkModel,
    h('datalist', {id: `models-${this.id.slice(0, 8)}`}, [...this.model.models].map((m) => h('option', {value: m}))),
    h('label', {for: forkMsgId}, 'Message'), forkMsg,
    h('label', {for: forkCountId, title: 'best-of-n: this many sessions from the same point'}, 'Forks'), forkCount,
    this.forkButton = h('button', {type: 'submit', dataset: {action: 'fork'}}, seq ? `Fork at #${seq}` : 'Fork'));
    this.cancelButton = h('button', {type: 'button', disabled: terminal, dataset: {action: 'cancel'},
      onclick: () => run(() => api.cancelSession(this.id), () => 'Cancel requested.')}, 'Cancel session');
    // A conversation that stays open (keep_open) waits for input between turns; Close ends it.
    this.closeButton = h('button', {type: 'button', hidden: this.status() !== 'waiting_for_input', dataset: {action: 'close'},
      onclick: () => run(() => api.closeSession(this.id), () => 'Close requested: the conversation ends.')}, 'Close conversation');
    // An interrupt cuts what runs now (model or tool call) and the session goes on with the message.
    const interruptId = `interrupt-${this.id.slice(0, 8)}`;
    const interruptText = h('input', {id: interruptId, name: 'interrupt', placeholder: 'what the agent should do instead'});
    this.interruptForm = h('form.inline.interrupt', {
      hidden: terminal,
      onsubmit: (e) => {
        e.preventDefault();
        const message = interruptText.value.trim();
        if (!message) {
          result.textContent = 'Write the message the agent goes on with first.';
          return;
        }
        run(() => api.interruptSession(this.id, message), (out) => {
          interruptText.value = '';
          return `Interrupted (event #${out.interrupt_seq}); the session goes on with your message.`;
        });
      },
    }, h('label', {for: interruptId}, 'Interrupt with'), interruptText,
    h('button', {type: 'submit', dataset: {action: 'interrupt'}}, 'Interrupt'));
    this.approvalsBox = h('section.approvals', {hidden: true, 'aria-label': 'Tool calls waiting for a decision'});
    this.approvalsKey = undefined;
    clear(this.actions, this.approvalsBox, this.interruptForm, this.cancelButton, this.closeButton,
      messageForm, forkForm, result);
  }

  renderTokens() {
    const turns = this.model.turns;
    if (this.tokensDrawn === turns.length) return;
    this.tokensDrawn = turns.length;
    if (!turns.length || !turns.some((t) => t.prompt + t.completion)) {
      clear(this.tokens, h('p.muted', turns.length ? `${turns.length} model calls, none reported tokens (a built-in agent such as oracle counts none).` : 'No model calls yet.'));
      return;
    }
    const max = Math.max(1, ...turns.map((t) => t.prompt + t.completion));
    const W = 800;
    const H = 120;
    const bw = Math.min(W / turns.length, 40);
    let prompt = '';
    let completion = '';
    turns.forEach((t, i) => {
      const x = (i * bw).toFixed(2);
      const w = Math.max(0.5, bw * 0.8).toFixed(2);
      const hp = (t.prompt / max) * H;
      const hc = (t.completion / max) * H;
      prompt += `M${x} ${(H - hp).toFixed(2)}h${w}v${hp.toFixed(2)}h-${w}z`;
      completion += `M${x} ${(H - hp - hc).toFixed(2)}h${w}v${hc.toFixed(2)}h-${w}z`;
    });
    const total = this.model.tokens;
    const label = `Tokens per turn over ${turns.length} turns: ${fmtInt(total.prompt)} prompt and ${fmtInt(total.completion)} completion tokens in all; the largest turn used ${fmtInt(max)}.`;
    const svg = h('svg', {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': label, class: 'chart'},
      h('path', {d: prompt, fill: '#90caf9'}), h('path', {d: completion, fill: '#1565c0'}));
    svg.addEventListener('click', (e) => {
      const r = svg.getBoundingClientRect();
      const t = turns[Math.min(turns.length - 1, Math.floor(((e.clientX - r.left) / r.width) * turns.length))];
      if (t) {
        this.transcript.select(t.seq);
        this.timeline.selectSeq(t.seq);
        this.remember(t.seq);
      }
    });
    clear(this.tokens, svg, h('p.legend-line', h('span.swatch.sw-prompt'), 'prompt ', h('span.swatch.sw-completion'), 'completion',
      ` · largest turn ${fmtInt(max)} tokens · click a bar to see its answer`));
  }

  renderFiles() {
    const files = this.model.files;
    const n = [...files.values()].reduce((a, l) => a + l.length, 0);
    const key = `${n}:${[...files.values()].flat().filter((c) => c.ok !== null).length}`;
    if (this.filesDrawn === key) return;
    this.filesDrawn = key;
    if (!n) {
      clear(this.files, h('p.muted', 'No file written or edited by a tool.'));
      return;
    }
    clear(this.files, ...[...files.entries()].map(([path, changes]) => h('details.fold.file', {open: files.size <= 3},
      h('summary', `${path} (${changes.length} change${changes.length > 1 ? 's' : ''})`),
      changes.length > FILE_CHANGES_SHOWN ? h('p.muted', `The last ${FILE_CHANGES_SHOWN} changes; every one is in the transcript at its tool call.`) : null,
      changes.slice(-FILE_CHANGES_SHOWN).map((c) => {
        const body = h('div');
        const d = h('details.fold', {open: changes.length <= 3},
          h('summary', `#${c.seq} ${c.kind}${c.ok === false ? ' (failed)' : c.ok === null ? ' (running)' : ''}`), body);
        const fill = () => {
          if (!body.firstChild) body.append(diffView(c.before, c.after));
        };
        if (d.open) fill();
        d.addEventListener('toggle', fill);
        return d;
      }))));
  }

  destroy() {
    this.abort.abort();
    clearInterval(this.tick);
    this.timeline.destroy();
  }
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new DOMException('aborted', 'AbortError'));
    }, {once: true});
  });
}

export {COLOURS};
