// WebhooksView: the caller's webhook endpoints (docs/harness.md, "Webhooks"): created from a
// URL and the event types (the signing secret shown once, at creation), deleted, and each
// one's delivery log (every event attempted: its webhook-id, state, attempts, last answer).
import {h, clear, announce, runAction} from './dom.js';
import * as api from './api.js';

// "2026-12-05 09:00:00": a time in UTC, to the second.
const utc = (ms) => (Number(ms) ? new Date(Number(ms)).toISOString().replace('T', ' ').slice(0, 19) : '—');
const TYPES = ['session.status_changed', 'session.requires_action', 'session.error'];

export class WebhooksView {
  constructor() {
    this.tbody = h('tbody');
    this.info = h('p.info', {role: 'status'});
    this.secret = h('div.secret', {hidden: true});
    this.log = h('section.deliveries', {'aria-labelledby': 'wh-log-h', hidden: true});
    this.form = h('form.filters', {'aria-labelledby': 'wh-new-h', onsubmit: (e) => {
      e.preventDefault();
      this.create();
    }},
    h('label', {for: 'wh-url'}, 'URL'),
    h('input', {id: 'wh-url', name: 'wh-url', required: true, placeholder: 'https://example.com/hooks/sinew', autocomplete: 'off'}),
    h('fieldset.events', h('legend', 'Events (none checked: all)'),
      TYPES.map((t) => h('label', h('input', {type: 'checkbox', name: 'wh-event', value: t}), ` ${t}`))),
    h('label', {for: 'wh-desc'}, 'Description'),
    h('input', {id: 'wh-desc', name: 'wh-desc', autocomplete: 'off'}),
    h('button', {type: 'submit'}, 'Create'));
    this.el = h('section.webhooks', {'aria-labelledby': 'webhooks-h'},
      h('h2#webhooks-h', 'Webhooks'),
      h('p', 'Session events of this tenant are POSTed to each endpoint, signed (Standard Webhooks), retried for a day. Times are shown in UTC.'),
      h('h3#wh-new-h', 'New endpoint'), this.form, this.info, this.secret,
      h('div.table-wrap', h('table.list',
        h('caption.visually-hidden', 'Webhook endpoints, oldest first'),
        h('thead', h('tr', ['URL', 'Events', 'Description', 'Created (UTC)', 'Actions']
          .map((c) => h('th', {scope: 'col'}, c)))),
        this.tbody)),
      this.log);
  }

  async load() {
    this.el.dataset.state = 'loading';
    try {
      this.render((await api.call('GET', '/v1/webhooks')).webhooks);
    } catch (e) {
      this.error(e);
    }
    this.el.dataset.state = 'ready';
  }

  error(e) {
    this.info.textContent = e.message;
    this.info.classList.add('error');
  }

  async create() {
    const body = {url: this.form.querySelector('#wh-url').value.trim()};
    const events = [...this.form.querySelectorAll('input[name=wh-event]:checked')].map((c) => c.value);
    if (events.length) body.events = events;
    const description = this.form.querySelector('#wh-desc').value.trim();
    if (description) body.description = description;
    try {
      const r = await api.call('POST', '/v1/webhooks', body);
      this.info.classList.remove('error');
      this.info.textContent = `Created webhook ${r.webhook.id}.`;
      announce(this.info.textContent);
      // The secret is in this answer only: shown once, to be copied now.
      clear(this.secret, h('p', 'Its signing secret, shown only now: '), h('code.whsec', r.webhook.secret));
      this.secret.hidden = false;
      this.form.reset();
      await this.load();
    } catch (e) {
      this.error(e);
    }
  }

  remove(hook) {
    return runAction(this.info, () => api.call('DELETE', `/v1/webhooks/${hook.id}`), `Deleted webhook ${hook.id}.`, () => {
      if (this.log.dataset.id === hook.id) this.log.hidden = true;
      return this.load();
    });
  }

  async deliveries(hook) {
    this.log.dataset.state = 'loading';
    try {
      const r = await api.call('GET', `/v1/webhooks/${hook.id}/deliveries`);
      const rows = r.deliveries.map((d) => h('tr', {'data-event': d.event_id},
        h('td', h('code', d.event_id)), h('td', d.type),
        h('td', h('a', {href: `#/s/${d.session_id}`}, d.session_id.slice(0, 8))),
        h('td', d.state), h('td', String(d.attempts)),
        h('td', d.last_status_code ? String(d.last_status_code) : '—'), h('td', d.last_error || '—'),
        h('td', utc(d.last_attempt_unix_ms))));
      this.log.dataset.id = hook.id;
      clear(this.log, h('h3#wh-log-h', `Deliveries to ${hook.url}`),
        h('button', {type: 'button', onclick: () => this.deliveries(hook)}, 'Refresh'),
        h('div.table-wrap', h('table.list',
          h('caption.visually-hidden', 'Deliveries, newest first'),
          h('thead', h('tr', ['Event (webhook-id)', 'Type', 'Session', 'State', 'Attempts', 'Last HTTP status', 'Last error', 'Last attempt (UTC)']
            .map((c) => h('th', {scope: 'col'}, c)))),
          h('tbody', rows.length ? rows : h('tr', h('td', {colspan: 8}, 'No deliveries yet.'))))));
      this.log.hidden = false;
    } catch (e) {
      this.error(e);
    }
    this.log.dataset.state = 'ready';
  }

  render(hooks) {
    if (!hooks.length) {
      clear(this.tbody, h('tr', h('td', {colspan: 5}, 'No webhooks.')));
      return;
    }
    clear(this.tbody, hooks.map((w) => h('tr', {'data-id': w.id},
      h('td', h('code', w.url)), h('td', w.events.length ? w.events.join(', ') : 'all'),
      h('td', w.description || ''), h('td', utc(w.created_unix_ms)),
      h('td',
        h('button', {type: 'button', 'aria-label': `Deliveries to ${w.url}`, onclick: () => this.deliveries(w)}, 'Deliveries'), ' ',
        h('button', {type: 'button', 'aria-label': `Delete webhook ${w.url}`, onclick: () => this.remove(w)}, 'Delete')))));
  }
}
