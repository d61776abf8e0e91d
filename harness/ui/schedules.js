// SchedulesView: the caller's schedules (docs/harness.md, "Schedules"): each with its
// cron, zone, next fire time and last tick (linked to the session it made), paused,
// resumed and deleted from here, and a form that creates one from a prompt.
import {h, clear, announce, runAction} from './dom.js';

// "2026-12-05 09:00:00": a time in UTC, to the second.
const utc = (ms) => new Date(Number(ms)).toISOString().replace('T', ' ').slice(0, 19);
import * as api from './api.js';

export class SchedulesView {
  constructor() {
    this.tbody = h('tbody');
    this.info = h('p.info', {role: 'status'});
    const field = (id, label, attrs) => [h('label', {for: id}, label), h('input', {id, name: id, ...attrs})];
    this.form = h('form.filters', {'aria-labelledby': 'sched-new-h', onsubmit: (e) => {
      e.preventDefault();
      this.create();
    }},
    field('s-cron', 'Cron', {required: true, placeholder: '0 9 * * MON-FRI', autocomplete: 'off'}),
    field('s-tz', 'Time zone', {placeholder: 'UTC', autocomplete: 'off'}),
    field('s-prompt', 'Prompt', {required: true, autocomplete: 'off'}),
    field('s-model', 'Model', {placeholder: 'the default', autocomplete: 'off'}),
    h('label', {for: 's-missed'}, 'Missed'),
    h('select', {id: 's-missed', name: 's-missed'}, h('option', {value: 'skip'}, 'skip'), h('option', {value: 'run_once'}, 'run once')),
    h('button', {type: 'submit'}, 'Create'));
    this.el = h('section.schedules', {'aria-labelledby': 'schedules-h'},
      h('h2#schedules-h', 'Schedules'),
      h('p', 'Each fire time of a schedule creates one session from its task. Times are shown in UTC.'),
      h('h3#sched-new-h', 'New schedule'), this.form, this.info,
      h('div.table-wrap', h('table.list',
        h('caption.visually-hidden', 'Schedules, newest first'),
        h('thead', h('tr', ['State', 'Cron', 'Time zone', 'Prompt', 'Next run (UTC)', 'Last tick', 'Actions']
          .map((c) => h('th', {scope: 'col'}, c)))),
        this.tbody)));
  }

  async load() {
    try {
      const all = [];
      let token = '';
      do {
        const q = new URLSearchParams({limit: '100'});
        if (token) q.set('page_token', token);
        const page = await api.call('GET', `/v1/schedules?${q}`);
        all.push(...page.schedules);
        token = page.next_page_token;
      } while (token);
      this.render(all);
    } catch (e) {
      this.error(e);
    }
  }

  error(e) {
    this.info.textContent = e.message;
    this.info.classList.add('error');
  }

  async create() {
    const value = (id) => this.form.querySelector(`#${id}`).value.trim();
    const task = {prompt: value('s-prompt')};
    if (value('s-model')) task.model = value('s-model');
    const body = {cron: value('s-cron'), task, missed: value('s-missed')};
    if (value('s-tz')) body.timezone = value('s-tz');
    try {
      const r = await api.call('POST', '/v1/schedules', body);
      this.info.classList.remove('error');
      this.info.textContent = `Created schedule ${r.schedule.id}.`;
      announce(this.info.textContent);
      this.form.reset();
      await this.load();
    } catch (e) {
      this.error(e);
    }
  }

  act(method, path, done) {
    return runAction(this.info, () => api.call(method, path), done, () => this.load());
  }

  render(schedules) {
    if (!schedules.length) {
      clear(this.tbody, h('tr', h('td', {colspan: 7}, 'No schedules.')));
      return;
    }
    clear(this.tbody, schedules.map((s) => {
      const path = `/v1/schedules/${s.id}`;
      const t = s.last_tick;
      const last = !t ? '—'
        : t.session_id ? h('a', {href: `#/s/${t.session_id}`}, `${utc(t.tick_unix_ms)} ${t.outcome}`)
        : `${utc(t.tick_unix_ms)} ${t.outcome}${t.reason ? `: ${t.reason}` : ''}`;
      const toggle = s.state === 'paused'
        ? h('button', {type: 'button', onclick: () => this.act('POST', `${path}/resume`, 'Resumed.')}, 'Resume')
        : h('button', {type: 'button', onclick: () => this.act('POST', `${path}/pause`, 'Paused.')}, 'Pause');
      return h('tr', {'data-id': s.id},
        h('td', s.state), h('td', h('code', s.cron)), h('td', s.timezone),
        h('td', s.task && typeof s.task.prompt === 'string' ? s.task.prompt : ''),
        h('td', s.next_run_unix_ms ? utc(s.next_run_unix_ms) : '—'), h('td', last),
        h('td', toggle, ' ', h('button', {type: 'button', 'aria-label': `Delete schedule ${s.cron}`,
          onclick: () => this.act('DELETE', path, 'Deleted.')}, 'Delete')));
    }));
  }
}
