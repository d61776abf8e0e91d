// SessionModel: one session's events and what the console derives from them, built
// incrementally as pages and streamed events arrive (no DOM here; test/unit.test.mjs).
//
// Spans (Gantt bars) per lane: model calls (model_request .. model_response), tool calls
// (tool_call .. tool_result), sandbox lifetimes (sandbox_provisioned .. released/lost).
// Marks (points) on the harness lane: status changes, errors, user messages, take-overs
// (annotation kind=resume), summaries.

export const LANES = ['model', 'tools', 'sandbox', 'harness'];

// The payload object of an event (its one set payload field), or {}.
export function payload(ev) {
  return ev[ev.type] || {};
}

// A SessionStatus as the API's session records spell it: "SESSION_STATUS_RUNNING" ->
// "running" (events carry the proto enum name).
export function statusName(v) {
  return String(v || '').replace(/^SESSION_STATUS_/, '').toLowerCase();
}

export function num(v) {
  return v === undefined || v === null || v === '' ? 0 : Number(v);
}

export class SessionModel {
  constructor() {
    this.events = [];        // events[seq - 1]; holes stay undefined until filled
    this.count = 0;          // events held
    this.lastSeq = 0;        // highest contiguous seq held (1..lastSeq all present)
    this.bytes = 0;          // JSON bytes of the events held (as received)
    this.spans = [];         // {lane, seq, endSeq, start, end, label, outcome, open}
    this.marks = [];         // {lane: 3, seq, at, label, kind}
    this.turns = [];         // {seq, turn, prompt, completion, cached}
    this.files = new Map();  // path -> [{seq, resultSeq, kind, before, after, ok}]
    this.items = [];         // spans and marks in seq order (keyboard navigation)
    this.task = null;        // the task JSON of session_created
    this.models = new Set();
    this.firstTs = 0;
    this.lastTs = 0;
    this.tokens = {prompt: 0, completion: 0, cached: 0};
    this.status = '';
    this.version = 0;        // bumped on every change (views redraw when it moves)
    this.openModel = new Map();
    this.openTools = new Map();
    this.openSandboxes = new Map();
    this.pendingFiles = new Map();  // call_id -> file change awaiting its result
    this.fileText = new Map();      // path -> its content as far as the log tells
    // Tool calls of the last model response waiting for a decision (docs/harness.md, "Tool
    // approvals"): call_id -> its approval_requested payload with the event's seq.
    this.approvals = new Map();
  }

  // Adds events (any order, duplicates ignored). Derivations run in seq order, so an
  // event past a hole waits until the hole is filled. Returns how many were new.
  add(events, bytes = 0) {
    let added = 0;
    for (const ev of events) {
      const seq = num(ev.seq);
      if (seq < 1 || this.events[seq - 1]) continue;
      ev.seq = seq;
      ev.ts = num(ev.timestamp_unix_ms);
      this.events[seq - 1] = ev;
      this.count++;
      added++;
    }
    this.bytes += bytes;
    while (this.events[this.lastSeq]) {
      this.derive(this.events[this.lastSeq]);
      this.lastSeq++;
    }
    if (added) this.version++;
    return added;
  }

  derive(ev) {
    const p = payload(ev);
    // A fork's copied events keep their original times, older than its event 1.
    if (!this.firstTs || ev.ts < this.firstTs) this.firstTs = ev.ts;
    this.lastTs = Math.max(this.lastTs, ev.ts);
    switch (ev.type) {
      case 'session_created':
        try {
          this.task = JSON.parse(p.task_json || '{}');
        } catch (_) {
          this.task = {};
        }
        if (this.task.model) this.models.add(this.task.model);
        break;
      case 'model_request': {
        const again = this.openModel.get(p.request_id);
        if (again) this.close(again, ev, 'interrupted', 'made again');
        if (p.model) this.models.add(p.model);
        this.openModel.set(p.request_id, this.open(0, ev, `${p.model || 'model'} turn ${num(p.turn)}`));
        break;
      }
      case 'model_response': {
        let span = this.openModel.get(p.request_id);
        this.openModel.delete(p.request_id);
        if (!span) span = this.open(0, ev, p.model || 'model', ev.ts - num(p.latency_ms));
        const u = p.usage || {};
        const turn = {seq: ev.seq, turn: this.turns.length + 1, prompt: num(u.prompt_tokens),
          completion: num(u.completion_tokens), cached: num(u.cached_prompt_tokens)};
        this.turns.push(turn);
        this.tokens.prompt += turn.prompt;
        this.tokens.completion += turn.completion;
        this.tokens.cached += turn.cached;
        this.approvals.clear();
        const calls = (p.tool_calls || []).length;
        this.close(span, ev, p.stop_reason || 'end_turn',
          `${fmtTokens(turn.completion)} out${calls ? `, ${calls} tool call${calls > 1 ? 's' : ''}` : ''}`);
        break;
      }
      case 'tool_call': {
        const span = this.open(1, ev, p.tool_name || 'tool');
        span.callId = p.call_id;
        this.openTools.set(p.call_id, span);
        this.noteFileChange(ev, p);
        break;
      }
      case 'tool_result': {
        let span = this.openTools.get(p.call_id);
        this.openTools.delete(p.call_id);
        if (!span) span = this.open(1, ev, 'tool', ev.ts - num(p.duration_ms));
        const outcome = p.interrupted ? 'interrupted' : p.timed_out ? 'timed_out' : p.is_error ? 'error' : 'ok';
        this.close(span, ev, outcome, p.exit_status ? `exit ${p.exit_status}` : '');
        span.resultSeq = ev.seq;
        const change = this.pendingFiles.get(p.call_id);
        if (change) {
          this.pendingFiles.delete(p.call_id);
          change.resultSeq = ev.seq;
          change.ok = outcome === 'ok';
          if (change.ok && change.after !== null) this.fileText.set(change.path, change.after);
        }
        break;
      }
      case 'sandbox_provisioned': {
        const span = this.open(2, ev, `sandbox ${short(p.sandbox_id)}`, ev.ts - num(p.provision_ms));
        span.detail = `provisioned in ${num(p.provision_ms)} ms${p.from_warm_pool ? ' (warm pool)' : ''}`;
        this.openSandboxes.set(p.sandbox_id, span);
        break;
      }
      case 'sandbox_released':
      case 'sandbox_lost': {
        const span = this.openSandboxes.get(p.sandbox_id);
        this.openSandboxes.delete(p.sandbox_id);
        if (span) this.close(span, ev, ev.type === 'sandbox_lost' ? 'lost' : 'released', p.outcome || p.reason || '');
        else this.mark(ev, ev.type === 'sandbox_lost' ? 'error' : 'sandbox', `${ev.type} ${short(p.sandbox_id)}`);
        break;
      }
      case 'sandbox_paused':
        this.mark(ev, 'sandbox', `sandbox ${short(p.sandbox_id)} paused (${p.reason}) in ${num(p.pause_ms)} ms`);
        break;
      case 'sandbox_resumed':
        this.mark(ev, 'sandbox', `sandbox ${short(p.sandbox_id)} resumed in ${num(p.resume_ms)} ms`);
        break;
      case 'sandbox_snapshot':
        this.mark(ev, 'sandbox', `sandbox ${short(p.sandbox_id)} snapshot ${short(p.snapshot_id)} (${p.reason}) in ${num(p.duration_ms)} ms`);
        break;
      case 'status_change': {
        const to = statusName(p.to);
        this.status = to;
        this.mark(ev, to === 'failed' ? 'error' : 'status', `${statusName(p.from) || '?'} → ${to}${p.reason ? `: ${p.reason}` : ''}`);
        if (['completed', 'failed', 'cancelled'].includes(to)) this.closeAll(ev, to === 'cancelled' ? 'cancelled' : 'interrupted');
        break;
      }
      case 'error':
        this.mark(ev, 'error', `${p.code}: ${p.message || ''}`);
        for (const span of this.openModel.values()) this.close(span, ev, 'error', p.code);
        this.openModel.clear();
        break;
      case 'user_message':
        this.mark(ev, 'message', `user: ${p.text || ''}`);
        break;
      case 'interrupt':
        this.mark(ev, 'message', `interrupt: ${p.message || ''}`);
        break;
      case 'approval_requested':
        this.approvals.set(p.call_id, {...p, seq: ev.seq});
        this.mark(ev, 'approval', `approval asked: ${p.tool_name || 'tool'} ${p.call_id || ''}`);
        break;
      case 'approval_decided':
        this.approvals.delete(p.call_id);
        this.mark(ev, 'approval', `${p.approved ? 'approved' : 'denied'} by ${p.by || '?'}: ${p.call_id || ''}${p.message ? ` (${p.message})` : ''}`);
        break;
      case 'annotation': {
        const kind = (p.labels || {}).kind || 'note';
        this.mark(ev, kind === 'resume' ? 'takeover' : kind, kind === 'resume' ? `harness take-over: ${p.text || ''}` : `${kind}: ${p.text || ''}`);
        break;
      }
      default:
        break;
    }
  }

  open(lane, ev, label, start = ev.ts) {
    const span = {lane, seq: ev.seq, endSeq: 0, start, end: ev.ts, label, outcome: 'open', open: true, detail: ''};
    this.spans.push(span);
    this.items.push(span);
    return span;
  }

  close(span, ev, outcome, detail) {
    span.end = Math.max(span.start, ev.ts);
    span.endSeq = ev.seq;
    span.outcome = outcome;
    span.open = false;
    if (detail) span.detail = span.detail ? `${span.detail}; ${detail}` : detail;
  }

  // A finished session leaves nothing running: what was still open ends with it.
  closeAll(ev, outcome) {
    for (const m of [this.openModel, this.openTools]) {
      for (const span of m.values()) this.close(span, ev, outcome, 'open when the session ended');
      m.clear();
    }
  }

  mark(ev, kind, label) {
    const m = {lane: 3, seq: ev.seq, start: ev.ts, end: ev.ts, label, kind, outcome: kind, mark: true};
    this.marks.push(m);
    this.items.push(m);
  }

  // write_file and edit_file calls: what the file was (as far as the log tells) and
  // what the call makes of it.
  noteFileChange(ev, p) {
    if (p.tool_name !== 'write_file' && p.tool_name !== 'edit_file') return;
    let input;
    try {
      input = JSON.parse(p.input_json || '{}');
    } catch (_) {
      return;
    }
    if (typeof input.path !== 'string') return;
    const known = this.fileText.has(input.path) ? this.fileText.get(input.path) : null;
    let change;
    if (p.tool_name === 'write_file') {
      change = {seq: ev.seq, kind: 'write', path: input.path, before: known ?? '', after: String(input.content ?? ''),
        knownBefore: known !== null};
    } else {
      const oldS = String(input.old_string ?? '');
      const newS = String(input.new_string ?? '');
      if (known !== null && known.includes(oldS)) {
        const after = input.replace_all ? known.split(oldS).join(newS) : known.replace(oldS, () => newS);
        change = {seq: ev.seq, kind: 'edit', path: input.path, before: known, after, knownBefore: true};
      } else {
        change = {seq: ev.seq, kind: 'edit', path: input.path, before: oldS, after: newS, knownBefore: false};
      }
    }
    change.resultSeq = 0;
    change.ok = null;
    if (!this.files.has(input.path)) this.files.set(input.path, []);
    this.files.get(input.path).push(change);
    this.pendingFiles.set(p.call_id, change);
  }

  get(seq) {
    return this.events[seq - 1];
  }
}

function short(id) {
  return String(id || '').slice(0, 12);
}

function fmtTokens(n) {
  return `${n} tok`;
}

// The item of `items` nearest to time `t` on `lane` (keyboard navigation up/down).
export function nearestOnLane(items, lane, t) {
  let best = null;
  let bestD = Infinity;
  for (const it of items) {
    if (it.lane !== lane) continue;
    const d = t < it.start ? it.start - t : t > it.end ? t - it.end : 0;
    if (d < bestD) {
      best = it;
      bestD = d;
    }
  }
  return best;
}
