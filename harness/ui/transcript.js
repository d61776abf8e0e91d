// Transcript: every event as one row of a virtual list (only the rows in view are in the
// DOM, so 10,000 events cost what 40 do), and the selected event in full beside it:
// text, reasoning apart, tool input and output folded, long outputs paged, file diffs.
import {h, clear, fmtClock, fmtInt, fmtBytes, firstLine, fmtDuration} from './dom.js';
import {payload, num, statusName} from './model.js';
import {diffLines, withContext} from './diff.js';

const ROW = 28;
const PAGE_CHARS = 64 * 1024;

export class Transcript {
  // onSelect(seq) when the user picks a row.
  constructor(model, {sessionId, onSelect, forkSeq = 0, label = 'Transcript'}) {
    this.model = model;
    this.sessionId = sessionId;
    this.onSelect = onSelect;
    this.forkSeq = forkSeq;
    this.selected = 0;
    this.spacer = h('div.tr-spacer');
    this.rows = h('div.tr-rows');
    this.list = h('div.tr-list', {
      role: 'listbox', tabindex: 0, 'aria-label': `${label}: one row per event; arrow keys move, Page Up/Down jump`,
      onkeydown: (e) => this.key(e), onscroll: () => this.render(),
    }, h('div.tr-space', {role: 'presentation'}, this.spacer, this.rows));
    this.detail = h('div.tr-detail', {role: 'region', 'aria-label': `Selected event (${label})`, tabindex: -1},
      h('p.muted', 'Select an event to see it in full.'));
    this.el = h('section.transcript', {'aria-label': label}, this.list, this.detail);
    this.rendered = '';
  }

  render(force = false) {
    const n = this.model.lastSeq;
    const height = this.list.clientHeight || 480;
    const first = Math.max(0, Math.floor(this.list.scrollTop / ROW) - 5);
    const last = Math.min(n, first + Math.ceil(height / ROW) + 10);
    const key = `${first}:${last}:${n}:${this.selected}`;
    if (!force && key === this.rendered) return;
    this.rendered = key;
    this.spacer.style.height = `${n * ROW}px`;
    this.rows.style.transform = `translateY(${first * ROW}px)`;
    clear(this.rows);
    for (let seq = first + 1; seq <= last; seq++) this.rows.append(this.row(this.model.get(seq)));
    this.list.dataset.events = String(n);
    if (this.selected && this.rows.querySelector(`#${this.rowId(this.selected)}`)) {
      this.list.setAttribute('aria-activedescendant', this.rowId(this.selected));
    } else {
      this.list.removeAttribute('aria-activedescendant');
    }
  }

  rowId(seq) {
    return `ev-${this.sessionId.slice(0, 8)}-${seq}`;
  }

  row(ev) {
    const cls = ['tr-row', `t-${ev.type}`];
    if (this.forkSeq && ev.seq > this.forkSeq) cls.push('diverged');
    if (this.forkSeq && ev.seq === this.forkSeq) cls.push('fork-point');
    const el = h('div', {
      class: cls.join(' '), role: 'option', id: this.rowId(ev.seq), 'aria-selected': String(ev.seq === this.selected),
      dataset: {seq: ev.seq}, onclick: () => this.pick(ev.seq),
    },
    h('span.seq', `#${ev.seq}`), h('span.time', fmtClock(ev.ts)), h('span.badge', {class: `badge b-${ev.type}`}, ev.type),
    h('span.summary', summary(ev)),
    ev.seq === this.forkSeq ? h('span.fork-tag', 'fork point: later events differ') : null);
    return el;
  }

  pick(seq) {
    this.select(seq);
    if (this.onSelect) this.onSelect(seq);
  }

  // Selects event `seq`, scrolls it into view and shows it in full.
  select(seq, {focus = false} = {}) {
    if (!this.model.get(seq)) return;
    this.selected = seq;
    const top = (seq - 1) * ROW;
    if (top < this.list.scrollTop || top + ROW > this.list.scrollTop + this.list.clientHeight) {
      this.list.scrollTop = Math.max(0, top - this.list.clientHeight / 2);
    }
    this.render(true);
    this.showDetail(this.model.get(seq));
    if (focus) this.list.focus();
  }

  key(e) {
    const n = this.model.lastSeq;
    if (!n) return;
    const page = Math.max(1, Math.floor(this.list.clientHeight / ROW) - 1);
    const cur = this.selected || 0;
    let next;
    switch (e.key) {
      case 'ArrowDown': next = Math.min(n, cur + 1); break;
      case 'ArrowUp': next = Math.max(1, cur - 1); break;
      case 'PageDown': next = Math.min(n, cur + page); break;
      case 'PageUp': next = Math.max(1, cur - page); break;
      case 'Home': next = 1; break;
      case 'End': next = n; break;
      case 'Enter': this.detail.focus(); e.preventDefault(); return;
      default: return;
    }
    e.preventDefault();
    this.pick(next);
  }

  showDetail(ev) {
    const p = payload(ev);
    const link = `#/s/${this.sessionId}/${ev.seq}`;
    clear(this.detail, 
      h('h3', `#${ev.seq} ${ev.type}`),
      h('p.meta', new Date(ev.ts).toISOString(), ' · ', h('a', {href: link}, 'link to this event')),
      ...detailBody(ev, p, this.model));
    this.detail.dataset.seq = String(ev.seq);
  }
}

function summary(ev) {
  const p = payload(ev);
  switch (ev.type) {
    case 'session_created': return firstLine(p.title || 'session created');
    case 'user_message': return firstLine(p.text);
    case 'model_request': return `${p.model || ''} turn ${num(p.turn)} (${num(p.prompt_messages)} messages)`;
    case 'model_response': {
      const calls = (p.tool_calls || []).map((c) => c.name).join(', ');
      return `${p.stop_reason || ''} ${firstLine(p.text, 100)}${calls ? ` → ${calls}` : ''}`;
    }
    case 'tool_call': return `${p.tool_name} ${firstLine(p.input_json, 120)}`;
    case 'tool_result': {
      const flags = [p.is_error && 'error', p.interrupted && 'interrupted', p.timed_out && 'timed out'].filter(Boolean);
      return `${flags.join(', ') || 'ok'} ${fmtBytes((p.output || '').length)}: ${firstLine(p.output, 100)}`;
    }
    case 'status_change': return `${statusName(p.from)} → ${statusName(p.to)}${p.reason ? `: ${p.reason}` : ''}`;
    case 'error': return `${p.code}: ${firstLine(p.message)}`;
    case 'annotation': return `${(p.labels || {}).kind || 'note'}: ${firstLine(p.text)}`;
    case 'audit': return `${p.action} by ${p.tenant} (key ${p.key_id}${p.remote_address ? `, from ${p.remote_address}` : ''})${p.detail ? `: ${firstLine(p.detail)}` : ''}`;
    case 'sandbox_provisioned': return `${p.sandbox_id} in ${num(p.provision_ms)} ms${p.from_snapshot ? ` from ${p.from_snapshot}` : ''}`;
    case 'sandbox_released': return `${p.sandbox_id}: ${p.reason || ''}`;
    case 'sandbox_lost': return `${p.sandbox_id}: ${p.outcome} ${p.detail || ''}`;
    case 'sandbox_paused': return `${p.sandbox_id}: ${p.reason} after ${num(p.idle_ms)} ms idle, in ${num(p.pause_ms)} ms`;
    case 'sandbox_resumed': return `${p.sandbox_id} in ${num(p.resume_ms)} ms`;
    case 'sandbox_snapshot': return `${p.sandbox_id} as ${p.snapshot_id} (${p.reason}, at seq ${p.at_seq}, ${fmtBytes(Number(p.added_bytes || 0))} added) in ${num(p.duration_ms)} ms`;
    default: return firstLine(JSON.stringify(p));
  }
}

function field(name, value) {
  return h('div.field', h('span.k', name), h('span.v', String(value)));
}

function pre(text, cls = '') {
  return h(`pre${cls}`, text);
}

function prettyJson(s) {
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch (_) {
    return String(s || '');
  }
}

// A long text shown PAGE_CHARS at a time, with a button for the next page.
export function paged(text, label) {
  const total = text.length;
  const body = h('pre.output');
  let shown = 0;
  const more = h('button.small', {type: 'button'});
  const step = () => {
    const next = Math.min(total, shown + PAGE_CHARS);
    body.append(text.slice(shown, next));
    shown = next;
    more.textContent = `Show more (${fmtBytes(shown)} of ${fmtBytes(total)} shown)`;
    more.hidden = shown >= total;
  };
  more.addEventListener('click', step);
  step();
  return h('details.fold', {open: total <= 4096}, h('summary', `${label} (${fmtBytes(total)})`), body, more);
}

function fold(label, text, open = false) {
  return h('details.fold', {open}, h('summary', label), pre(text));
}

export function diffView(before, after) {
  const lines = withContext(diffLines(before, after));
  const rows = lines.map((l) => l.op === '…'
    ? h('div.d-skip', `… ${l.count} unchanged lines`)
    : h('div', {class: l.op === '+' ? 'd-add' : l.op === '-' ? 'd-del' : 'd-same'}, `${l.op} ${l.text}`));
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  return h('div.diff', {'aria-label': `diff: ${added} lines added, ${removed} removed`}, rows);
}

function detailBody(ev, p, model) {
  switch (ev.type) {
    case 'session_created':
      return [field('title', p.title || ''), p.forked_from_session
        ? h('p', 'Forked from ', h('a', {href: `#/s/${p.forked_from_session}/${num(p.forked_at_seq)}`},
          `${p.forked_from_session} at #${num(p.forked_at_seq)}`)) : null,
      fold('Task', prettyJson(p.task_json), true)];
    case 'user_message':
      return [pre(p.text || '')];
    case 'model_request':
      return [field('model', p.model || ''), field('turn', num(p.turn)), field('messages in the prompt', num(p.prompt_messages)),
        p.params_json ? fold('Parameters', prettyJson(p.params_json)) : null];
    case 'model_response': {
      const u = p.usage || {};
      return [
        field('model', p.model || ''), field('stop reason', p.stop_reason || ''),
        field('tokens', `${fmtInt(u.prompt_tokens)} in (${fmtInt(u.cached_prompt_tokens)} cached), ${fmtInt(u.completion_tokens)} out`),
        field('latency', `${fmtDuration(num(p.latency_ms))}${num(p.time_to_first_token_ms) >= 0 ? `, first token ${fmtDuration(num(p.time_to_first_token_ms))}` : ', not streamed'}`),
        p.reasoning ? h('details.fold.reasoning', h('summary', `Reasoning (${fmtInt(p.reasoning.length)} characters)`), pre(p.reasoning)) : null,
        h('h4', 'Answer'), pre(p.text || '(no text)'),
        (p.tool_calls || []).length ? h('h4', 'Tool calls') : null,
        (p.tool_calls || []).map((c) => fold(`${c.name} (${c.call_id})`, prettyJson(c.input_json))),
      ];
    }
    case 'tool_call': {
      const change = [...model.files.values()].flat().find((c) => c.seq === ev.seq);
      const span = model.spans.find((s) => s.seq === ev.seq);
      return [
        field('tool', p.tool_name), field('call id', p.call_id), field('idempotent', p.idempotent ? 'yes' : 'no'),
        p.sandbox_id ? field('sandbox', p.sandbox_id) : null,
        span && span.resultSeq ? h('p', h('a', {href: `#/s/${ev.session_id}/${span.resultSeq}`}, `result: event #${span.resultSeq}`)) : null,
        change ? h('div.file-change', h('h4', `${change.kind === 'write' ? 'Writes' : 'Edits'} ${change.path}`),
          change.knownBefore ? null : h('p.muted', change.kind === 'write' ? 'Earlier content unknown to the log: shown as new.' : 'The edit (old string → new string); the whole file is unknown to the log.'),
          diffView(change.before, change.after)) : null,
        fold('Input', prettyJson(p.input_json), !change),
      ];
    }
    case 'tool_result': {
      const span = model.spans.find((s) => s.resultSeq === ev.seq);
      return [
        field('call id', p.call_id),
        field('outcome', p.interrupted ? 'interrupted' : p.timed_out ? 'timed out' : p.is_error ? 'error' : 'ok'),
        field('exit status', num(p.exit_status)), p.signal ? field('signal', p.signal) : null,
        field('duration', fmtDuration(num(p.duration_ms))), p.truncated ? field('truncated', 'yes') : null,
        span ? h('p', h('a', {href: `#/s/${ev.session_id}/${span.seq}`}, `call: event #${span.seq}`)) : null,
        paged(p.output || '', 'Output'),
      ];
    }
    case 'status_change':
      return [field('from', statusName(p.from)), field('to', statusName(p.to)), field('reason', p.reason || '')];
    case 'error':
      return [field('code', p.code), field('retryable', p.retryable ? 'yes' : 'no'),
        p.http_status ? field('HTTP status', p.http_status) : null, p.limit ? field('limit', p.limit) : null, pre(p.message || '')];
    case 'annotation':
      return [field('author', p.author || ''), ...Object.entries(p.labels || {}).map(([k, v]) => field(k, v)),
        (p.text || '').length > 2000 ? paged(p.text, 'Text') : pre(p.text || '')];
    default:
      return [fold('Event', JSON.stringify(ev, null, 2), true)];
  }
}
