// EvalsView: evaluation runs. `sinew eval` writes its results to the job directory
// (results.json, schema sinew.eval.results/1, docs/eval.md), not to the harness, so the
// page opens that file from the user's disk (it is read in the browser and sent
// nowhere) and keeps it for the tab. Each trial is a harness session: the grid links
// every attempt to its session in this console.
import {h, clear, append, fmtInt} from './dom.js';

const STORE = 'sinew.evalJobs';
const OUTCOME_COLOURS = {
  passed: '#2e7d32', failed: '#c62828', agent_timeout: '#6a1b9a', verifier_timeout: '#8e24aa',
  agent_error: '#bf360c', infra_error: '#455a64',
};

export function loadedJobs() {
  try {
    return JSON.parse(sessionStorage.getItem(STORE) || '[]');
  } catch (_) {
    return [];
  }
}

function saveJobs(jobs) {
  try {
    sessionStorage.setItem(STORE, JSON.stringify(jobs));
    return true;
  } catch (_) {
    return false;  // too large for sessionStorage: kept in memory only
  }
}

let memoryJobs = null;

export class EvalsView {
  constructor(params) {
    this.jobs = memoryJobs || loadedJobs();
    this.current = Number(params.get('job') || 0);
    this.msg = h('p.info', {role: 'status'});
    const input = h('input', {id: 'results-file', type: 'file', accept: '.json,application/json', multiple: true,
      onchange: (e) => this.open(e.target.files)});
    this.body = h('div');
    this.el = h('section.evals', {'aria-labelledby': 'evals-h'},
      h('h2#evals-h', 'Evaluation runs'),
      h('p', 'Open the results.json of one or more ', h('code', 'sinew eval'), ' jobs (in the job directory). The file is read in this browser only. ',
        'Trial links open the trial\'s session when the harness serving this console holds the job\'s store (',
        h('code', 'scripts/eval.sh console JOB'), ' brings one up on it).'),
      h('div.filters', h('label', {for: 'results-file'}, 'results.json'), input),
      this.msg, this.body);
    this.el.addEventListener('dragover', (e) => e.preventDefault());
    this.el.addEventListener('drop', (e) => {
      e.preventDefault();
      this.open(e.dataTransfer.files);
    });
  }

  load() {
    this.render();
  }

  async open(files) {
    let added = 0;
    for (const f of files) {
      try {
        const r = JSON.parse(await f.text());
        if (r.schema !== 'sinew.eval.results/1') throw new Error(`schema is ${JSON.stringify(r.schema)}, not sinew.eval.results/1`);
        r.fileName = f.name;
        this.jobs.push(r);
        added++;
      } catch (e) {
        this.msg.textContent = `${f.name}: not an evaluation's results.json (${e.message})`;
        this.msg.classList.add('error');
      }
    }
    if (added) {
      this.current = this.jobs.length - 1;
      if (!saveJobs(this.jobs)) memoryJobs = this.jobs;
      this.msg.textContent = `Opened ${added} job${added > 1 ? 's' : ''}.`;
      this.msg.classList.remove('error');
    }
    this.render();
  }

  render() {
    clear(this.body);
    if (!this.jobs.length) {
      this.body.append(h('p.muted', 'No job opened yet.'));
      return;
    }
    this.body.append(h('h3', 'Jobs'), h('table.list',
      h('thead', h('tr', [h('span.visually-hidden', 'Show'), 'Suite', 'Agent', 'Model', 'Configurations', 'Trials', 'Attempts', 'Started'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', this.jobs.map((j, i) => h('tr', {class: i === this.current ? 'current' : ''},
        h('td', h('button.small', {type: 'button', 'aria-pressed': String(i === this.current), onclick: () => {
          this.current = i;
          history.replaceState(null, '', `#/evals?job=${i}`);
          this.render();
        }}, i === this.current ? 'Shown' : 'Show')),
        h('td', (j.job || {}).suite || j.fileName), h('td', (j.job || {}).agent || ''), h('td', (j.job || {}).model || '—'),
        h('td', (j.configs || []).join(', ')), h('td', String((j.job || {}).trials ?? '')), h('td', fmtInt((j.trials || []).length)),
        h('td', (j.job || {}).created_unix_ms ? new Date(Number(j.job.created_unix_ms)).toISOString() : ''))))));
    const job = this.jobs[Math.min(this.current, this.jobs.length - 1)];
    append(this.body, [summary(job), comparisons(job), grid(job)]);
  }

  destroy() {}
}

function pct(x) {
  return `${(Number(x) * 100).toFixed(1)}%`;
}

// Pass rate per configuration with its Wilson 95% interval, drawn and in numbers.
function summary(job) {
  const configs = job.configs || Object.keys(job.summary || {});
  const W = 300;
  return h('section', {'aria-labelledby': 'ev-sum'}, h('h3#ev-sum', 'Pass rate per configuration'),
    h('table.list.summary',
      h('thead', h('tr', ['Configuration', 'Trials', 'Passed', 'Pass rate (95% Wilson)', h('span.visually-hidden', 'Pass rate drawn'), 'Infra errors', 'Excluding infra'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', configs.map((c) => {
        const s = (job.summary || {})[c] || {};
        const [lo, hi] = s.wilson_95 || [0, 0];
        const [elo, ehi] = s.wilson_95_excluding_infra || [0, 0];
        const bar = h('svg', {viewBox: `0 0 ${W} 16`, width: W, height: 16, role: 'img',
          'aria-label': `${c}: ${pct(s.pass_rate || 0)}, 95% interval ${pct(lo)} to ${pct(hi)}`},
        h('rect', {x: 0, y: 3, width: W, height: 10, fill: '#eceff3'}),
        h('rect', {x: 0, y: 3, width: (s.pass_rate || 0) * W, height: 10, fill: '#2e7d32'}),
        h('line', {x1: lo * W, x2: hi * W, y1: 8, y2: 8, stroke: '#111', 'stroke-width': 2}),
        h('line', {x1: lo * W, x2: lo * W, y1: 3, y2: 13, stroke: '#111', 'stroke-width': 2}),
        h('line', {x1: hi * W, x2: hi * W, y1: 3, y2: 13, stroke: '#111', 'stroke-width': 2}));
        return h('tr', {dataset: {config: c}}, h('th', {scope: 'row'}, c), h('td.num', fmtInt(s.n)), h('td.num', fmtInt(s.passed)),
          h('td.num', `${pct(s.pass_rate || 0)} [${pct(lo)}, ${pct(hi)}]`), h('td', bar),
          h('td.num', `${fmtInt(s.infra_errors)} (${pct(s.infra_error_rate || 0)})`),
          h('td.num', `${pct(s.pass_rate_excluding_infra || 0)} [${pct(elo)}, ${pct(ehi)}]`));
      }))));
}

function comparisons(job) {
  const list = job.comparisons || [];
  if (!list.length) return null;
  return h('section', {'aria-labelledby': 'ev-cmp'}, h('h3#ev-cmp', 'Configurations compared (paired)'),
    h('table.list',
      h('thead', h('tr', ['A', 'B', 'Pairs', 'Only A passed', 'Only B passed', 'Difference (95%)', 'McNemar p', 'Bootstrap p', 'Verdict'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', list.map((c) => {
        const [lo, hi] = c.difference_95 || [0, 0];
        return h('tr', h('td', c.a), h('td', c.b), h('td.num', fmtInt(c.pairs)), h('td.num', fmtInt(c.only_a_passed)),
          h('td.num', fmtInt(c.only_b_passed)), h('td.num', `${pct(c.difference || 0)} [${pct(lo)}, ${pct(hi)}]`),
          h('td.num', Number(c.mcnemar_exact_p ?? 1).toPrecision(3)), h('td.num', Number(c.bootstrap_p ?? 1) === 0 ? '< 0.0001' : Number(c.bootstrap_p ?? 1).toPrecision(3)),
          h('td', Number(c.mcnemar_exact_p ?? 1) < 0.05 ? 'a real difference at 5%' : 'could be noise'));
      }))));
}

// Tasks × configurations; each cell holds one chip per attempt, linked to its session.
function grid(job) {
  const configs = job.configs || [];
  const tasks = job.tasks || [...new Set((job.trials || []).map((t) => t.task))];
  const cells = new Map();
  for (const t of job.trials || []) {
    const k = `${t.task}\u0000${t.config}`;
    if (!cells.has(k)) cells.set(k, []);
    cells.get(k).push(t);
  }
  return h('section', {'aria-labelledby': 'ev-grid'}, h('h3#ev-grid', 'Tasks × configurations'),
    h('ul.legend', {'aria-label': 'Outcomes'}, Object.keys(OUTCOME_COLOURS).map((o) => {
      const sw = h('span.swatch');
      sw.style.background = OUTCOME_COLOURS[o];
      return h('li', sw, o);
    }), h('li', 'dashed: an attempt that was retried')),
    h('div.table-wrap', h('table.grid',
      h('thead', h('tr', h('th', {scope: 'col'}, 'Task'), configs.map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', tasks.map((task) => h('tr', h('th', {scope: 'row'}, task), configs.map((c) => {
        const attempts = (cells.get(`${task}\u0000${c}`) || []).slice().sort((a, b) => a.trial - b.trial || a.attempt - b.attempt);
        return h('td', attempts.map((t) => {
          const label = `${task} ${c} trial ${t.trial} attempt ${t.attempt}: ${t.outcome}${t.cause ? ` (${t.cause})` : ''}`;
          const chip = t.session_id
            ? h('a.chip', {href: `#/s/${t.session_id}`, title: label, 'aria-label': label, dataset: {outcome: t.outcome}}, `${t.trial}.${t.attempt}`)
            : h('span.chip', {title: `${label}; no session (ended before its agent)`, dataset: {outcome: t.outcome}}, `${t.trial}.${t.attempt}`);
          const colour = OUTCOME_COLOURS[t.outcome] || '#555';
          if (t.final) chip.style.background = colour;
          else {
            chip.classList.add('retried');
            chip.style.borderColor = colour;
          }
          return chip;
        }));
      })))))));
}
