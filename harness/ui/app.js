// The console's entry: the API key (typed once, or passed as /ui/#key=…, kept in
// sessionStorage for this tab only, never in a URL a server sees) and the routes:
//   #/sessions[?status=&q=&limit=]   the list
//   #/s/<id>[/<seq>]                 one session, event <seq> selected
//   #/compare/<a>/<b>[/<seq>]        two sessions side by side (a fork and its origin)
//   #/schedules                      schedules: create, pause, resume, delete
//   #/sandboxes                      the sandbox API's sandboxes: state, use; pause, resume, delete
//   #/webhooks                       webhook endpoints: create, delete, delivery log
//   #/evals[?job=N]                  evaluation runs
import {h, clear} from './dom.js';
import * as api from './api.js';
import {SessionsView} from './sessions.js';
import {SessionView} from './session.js';
import {EvalsView} from './evals.js';
import {SchedulesView} from './schedules.js';
import {SandboxesView} from './sandboxes.js';
import {WebhooksView} from './webhooks.js';

const main = document.getElementById('main');
let view = null;

// A key in the fragment (#key=K or #key=K&/route) is taken and removed from the URL.
function takeKeyFromFragment() {
  const m = /^#key=([^&]*)(?:&(.*))?$/.exec(location.hash);
  if (!m) return;
  api.setApiKey(decodeURIComponent(m[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}#${m[2] || '/sessions'}`);
}

function keyForm(message) {
  const input = h('input', {id: 'api-key', type: 'password', name: 'key', autocomplete: 'off', required: true});
  return h('section.key', {'aria-labelledby': 'key-h'},
    h('h2#key-h', 'API key'),
    message ? h('p.error', {role: 'alert'}, message) : null,
    h('p', 'The console reads and steers sessions through the harness API with your key. It is kept for this tab only.'),
    h('form', {onsubmit: (e) => {
      e.preventDefault();
      api.setApiKey(input.value.trim());
      route();
    }}, h('label', {for: 'api-key'}, 'Key'), input, h('button', {type: 'submit'}, 'Use this key')));
}

function show(next, title) {
  if (view && view.destroy) view.destroy();
  view = next;
  clear(main, Array.isArray(next.el) ? next.el : next.el);
  document.title = `${title} · Sinew console`;
  for (const a of document.querySelectorAll('nav.top a')) {
    if (location.hash.startsWith(a.getAttribute('href'))) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  return next.load ? next.load() : null;
}

class CompareView {
  constructor(a, b, seq) {
    this.left = new SessionView(a, {compact: true, forkSeq: seq, seq, label: 'original'});
    this.right = new SessionView(b, {compact: true, forkSeq: seq, seq, label: 'fork'});
    this.el = h('section.compare', {'aria-labelledby': 'cmp-h'},
      h('h2#cmp-h', `Fork at event #${seq}: the original and the fork side by side`),
      h('p.muted', 'Events up to the fork point are the same in both; rows after it are marked as diverged.'),
      h('div.columns', this.left.el, this.right.el));
  }

  load() {
    return Promise.all([this.left.load(), this.right.load()]);
  }

  destroy() {
    this.left.destroy();
    this.right.destroy();
  }
}

function route() {
  takeKeyFromFragment();
  document.getElementById('forget').hidden = !api.apiKey();
  if (!api.apiKey()) {
    if (view && view.destroy) view.destroy();
    view = null;
    clear(main, keyForm(''));
    document.title = 'API key · Sinew console';
    return;
  }
  const hash = location.hash.replace(/^#/, '') || '/sessions';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean);
  const id = /^[0-9a-f]{32}$/;
  if (parts[0] === 's' && id.test(parts[1] || '')) {
    const seq = Number(parts[2]) || 0;
    // Selecting an event rewrites the hash: the same session stays loaded.
    if (view instanceof SessionView && view.id === parts[1]) {
      if (seq && seq !== view.transcript.selected) {
        view.transcript.select(seq);
        view.timeline.selectSeq(seq);
      }
      return;
    }
    return show(new SessionView(parts[1], {seq}), `Session ${parts[1].slice(0, 8)}`);
  }
  if (parts[0] === 'compare' && id.test(parts[1] || '') && id.test(parts[2] || '')) {
    return show(new CompareView(parts[1], parts[2], Number(parts[3]) || 0), 'Fork comparison');
  }
  if (parts[0] === 'evals') return show(new EvalsView(params), 'Evaluation runs');
  if (parts[0] === 'schedules') return show(new SchedulesView(), 'Schedules');
  if (parts[0] === 'sandboxes') return show(new SandboxesView(), 'Sandboxes');
  if (parts[0] === 'webhooks') return show(new WebhooksView(), 'Webhooks');
  if (parts[0] !== 'sessions') history.replaceState(null, '', '#/sessions');
  return show(new SessionsView(params), 'Sessions');
}

api.onUnauthorized((message) => {
  api.setApiKey('');
  if (view && view.destroy) view.destroy();
  view = null;
  document.getElementById('forget').hidden = true;
  clear(main, keyForm(`The harness refused the key: ${message}`));
});

document.getElementById('forget').addEventListener('click', () => {
  api.setApiKey('');
  route();
});
document.getElementById('skip').addEventListener('click', () => main.focus());
window.addEventListener('hashchange', route);
route();
