// A real sinew-store and sinew-harness on loopback for the console's browser test and
// benchmark, with scripted models (test doubles of language models) and an HTTP server
// in this process as the allowlisted target of the http_request tool; and sessions of
// any size made through the API's import (real events, real store). With
// `{sandboxd: true}`, also a real sinew-sandboxd (runc) where this machine can run one
// (root, runc, the sandbox image): `stack.sandboxd`, or `stack.sandboxdWhy` when not.
import {spawn} from 'node:child_process';
import {createServer} from 'node:http';
import {existsSync, mkdtempSync, readdirSync, rmdirSync, writeFileSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {randomBytes} from 'node:crypto';
import net from 'node:net';

export const KEY = 'console-test-key';
export const TENANT = 'tenant-ui';

const binDir = process.env.SINEW_BIN_DIR || join(process.cwd(), 'build/bin');

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Starts `argv`; resolves with {proc, address} once it prints "listening on HOST:PORT"
// (or what `ready` matches: its first group is the address).
function startProcess(argv, log, ready = /listening on (\S+)/) {
  return new Promise((resolve, reject) => {
    const proc = spawn(argv[0], argv.slice(1), {stdio: ['ignore', 'pipe', 'pipe']});
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${argv[0]} did not start:\n${seen}`)), 30000);
    const onData = (d) => {
      const text = d.toString();
      log.push(text);
      seen += text;
      const m = ready.exec(seen);
      if (m) {
        clearTimeout(timer);
        resolve({proc, address: m[1]});
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${argv[0]} exited (${code}) before listening:\n${seen}`));
    });
  });
}

// sinew-sandboxd with its own state directory and cgroup parent: {proc, address, tag},
// or {why} when it cannot run here.
async function startSandboxd(log) {
  if (process.getuid() !== 0) return {why: 'not root (runc sandboxes need root)'};
  const bin = join(binDir, 'sinew-sandboxd');
  if (!existsSync(bin)) return {why: `${bin} is not built`};
  const port = await freePort();
  const tag = `sinew-ui-test-${process.pid}`;
  try {
    const {proc} = await startProcess([bin, '--listen', `127.0.0.1:${port}`, '--state-dir', `/run/${tag}`,
      '--cgroup-parent', tag, '--warm-pool-size', '0'], log, /listening on port (\d+)/);
    return {proc, address: `127.0.0.1:${port}`, tag};
  } catch (e) {
    return {why: e.message};
  }
}

// What a stopped sinew-sandboxd leaves: its state directory and cgroup directories.
function removeSandboxdState(tag) {
  rmSync(`/run/${tag}`, {recursive: true, force: true});
  let controllers = [];
  try {
    controllers = readdirSync('/sys/fs/cgroup');
  } catch (_) {
    return;
  }
  for (const c of [...controllers.map((d) => join('/sys/fs/cgroup', d, tag)), join('/sys/fs/cgroup', tag)]) {
    try {
      rmdirSync(c);
    } catch (_) {
      // not there, or not empty: nothing of ours to remove
    }
  }
}

export async function startStack({sandboxd: wantSandboxd = false} = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'sinew-ui-'));
  const log = [];
  const target = createServer((req, res) => {
    res.writeHead(200, {'Content-Type': 'text/plain'});
    res.end(`fetched ${req.url}\n`.repeat(3));
  });
  await new Promise((r) => target.listen(0, '127.0.0.1', r));
  const targetUrl = `http://127.0.0.1:${target.address().port}`;
  const fetchCall = (path) => ({name: 'http_request', input: {url: `${targetUrl}${path}`}});
  const scripts = {
    // Two tool calls then an answer, with reasoning.
    basic: {responses: [
      {text: 'Fetching the data.', tool_calls: [fetchCall('/data')]},
      {text: 'Done: the data is fetched.'}]},
    // A session that runs for a while: a model call every `delay_ms`, each with a tool call.
    slow: {responses: [...Array.from({length: 14}, (_, i) => ({text: `step ${i + 1}`, delay_ms: 400, tool_calls: [fetchCall(`/step/${i + 1}`)]})),
      {text: 'all steps done', delay_ms: 200}]},
    // Long enough to kill and restart the harness in the middle.
    slower: {responses: [...Array.from({length: 40}, (_, i) => ({text: `step ${i + 1}`, delay_ms: 500, tool_calls: [fetchCall(`/s/${i + 1}`)]})),
      {text: 'all steps done', delay_ms: 200}]},
    // A model call that stalls (a minute) until an interrupt cuts it, then answers the interrupt.
    stall: {responses: [
      {streamed_before_delay: 'I will drop the production', text: ' table now.', delay_ms: 60000},
      {text: 'Understood: {{last_user}}'}]},
    // What a fork continues with (and a sub-agent's answer).
    other: {responses: [{text: 'A different answer after the fork.'}]},
    // A parent that delegates to a sub-agent (model `other`), then answers.
    delegator: {responses: [
      {text: 'Delegating.', tool_calls: [{name: 'delegate', input: {task: 'answer for me', model: 'other'}}]},
      {text: 'The sub-agent answered.'}]},
  };
  for (const [name, s] of Object.entries(scripts)) writeFileSync(join(dir, `${name}.json`), JSON.stringify(s));
  const store = await startProcess([join(binDir, 'sinew-store'), '--db', join(dir, 'db'), '--listen', '127.0.0.1:0'], log);
  const sandboxd = wantSandboxd ? await startSandboxd(log) : {why: 'not asked for'};
  const port = await freePort();
  const config = {
    listen: `127.0.0.1:${port}`, store: {address: store.address},
    api_keys: {[KEY]: TENANT, 'other-tenant-key': 'tenant-other'},
    default_model: 'basic',
    models: Object.fromEntries(Object.keys(scripts).map((n) => [n, {kind: 'scripted', script: join(dir, `${n}.json`)}])),
    http_request: {allow: [{host: `127.0.0.1:${target.address().port}`}]},
    // The page test's webhooks go to the target server on loopback.
    tenants: {[TENANT]: {webhook_allow_private: true}}, webhooks: {poll_ms: 200},
    max_request_bytes: 256 * 1024 * 1024, lease_ttl_ms: 1500, scan_interval_ms: 300,
  };
  if (sandboxd.address) config.sandboxd = {address: sandboxd.address};
  writeFileSync(join(dir, 'harness.json'), JSON.stringify(config));
  const stack = {
    dir, log, base: `http://127.0.0.1:${port}`, store, harness: null, targetUrl,
    sandboxd: sandboxd.address ? sandboxd : null, sandboxdWhy: sandboxd.why || '',
    async startHarness() {
      this.harness = await startProcess([join(binDir, 'sinew-harness'), '--config', join(dir, 'harness.json')], log);
    },
    killHarness() {
      const p = this.harness.proc;
      this.harness = null;
      return new Promise((r) => {
        p.once('exit', r);
        p.kill('SIGKILL');
      });
    },
    async stop() {
      for (const p of [this.harness && this.harness.proc, this.sandboxd && this.sandboxd.proc, store.proc]) {
        if (!p || p.exitCode !== null) continue;
        await new Promise((r) => {
          p.once('exit', r);
          p.kill('SIGTERM');
        });
      }
      target.close();
      if (this.sandboxd) removeSandboxdState(this.sandboxd.tag);
      rmSync(dir, {recursive: true, force: true});
    },
    api(method, path, body, key = KEY) {
      return fetch(`${this.base}${path}`, {
        method, headers: {Authorization: `Bearer ${key}`, 'Content-Type': 'application/json'},
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({status: r.status, json: await r.json().catch(() => null), headers: r.headers}));
    },
    async submit(task) {
      const r = await this.api('POST', '/v1/sessions', task);
      if (r.status !== 201) throw new Error(`submit: ${r.status} ${JSON.stringify(r.json)}`);
      return r.json.session.id;
    },
    async waitStatus(id, statuses, timeoutMs = 60000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const r = await this.api('GET', `/v1/sessions/${id}`);
        if (r.status === 200 && statuses.includes(r.json.session.status)) return r.json.session;
        if (Date.now() > until) throw new Error(`session ${id} is still ${r.json && r.json.session.status}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    },
    async allEvents(id) {
      const out = [];
      for (let after = 0; ;) {
        const r = await this.api('GET', `/v1/sessions/${id}/events?after=${after}&limit=1000`);
        if (!r.json.events.length) return out;
        out.push(...r.json.events);
        after = Number(r.json.events[r.json.events.length - 1].seq);
      }
    },
    // Imports a made-up session of `events` events (NDJSON through POST /import).
    async importSession(opts) {
      const {id, ndjson} = makeSession(opts);
      const r = await fetch(`${this.base}/v1/sessions/import`, {
        method: 'POST', headers: {Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/x-ndjson'}, body: ndjson});
      if (r.status !== 201) throw new Error(`import: ${r.status} ${await r.text()}`);
      return id;
    },
  };
  await stack.startHarness();
  return stack;
}

// A session as an agent run would leave it: turns of model request/response (tokens,
// some reasoning), tool calls with results (write_file, edit_file, bash, http_request;
// outputs of `outputBytes` each), a sandbox, a harness take-over half way, and the end.
export function makeSession({events = 1000, outputBytes = 200, title = 'imported session'} = {}) {
  const id = randomBytes(16).toString('hex');
  let seq = 0;
  let ts = Date.now() - events * 120;
  const lines = [];
  const add = (type, payload, dt = 40) => {
    ts += dt;
    seq++;
    lines.push(JSON.stringify({session_id: id, seq: String(seq), timestamp_unix_ms: String(ts), type, [type]: payload}));
  };
  add('session_created', {tenant: TENANT, title, metadata: {suite: 'ui-bench'},
    task_json: JSON.stringify({prompt: 'Make the tests pass.', model: 'basic', title})});
  add('status_change', {from: 'SESSION_STATUS_QUEUED', to: 'SESSION_STATUS_RUNNING', reason: 'picked up'});
  add('user_message', {text: 'Make the tests pass.'});
  const filler = 'x'.repeat(Math.max(0, outputBytes - 40));
  let content = 'line 1\nline 2\nline 3\n';
  let turn = 0;
  while (seq < events - 2) {
    turn++;
    const rid = `r${turn}`;
    const cid = `c${turn}`;
    add('model_request', {request_id: rid, model: 'basic', turn, prompt_messages: 2 * turn});
    const kind = turn % 4;
    let tool;
    let input;
    if (kind === 1) {
      tool = 'write_file';
      content = `${content}line ${turn + 3}\n`;
      input = {path: '/workspace/notes.txt', content};
    } else if (kind === 2) {
      tool = 'edit_file';
      input = {path: '/workspace/notes.txt', old_string: 'line 2', new_string: `line 2 (turn ${turn})`};
      content = content.replace('line 2', `line 2 (turn ${turn})`);
    } else if (kind === 3) {
      tool = 'bash';
      input = {command: `make test-${turn}`};
    } else {
      tool = 'http_request';
      input = {url: `http://127.0.0.1:1/${turn}`};
    }
    add('model_response', {request_id: rid, model: 'basic', text: `Turn ${turn}: running ${tool}.`,
      reasoning: turn % 3 === 0 ? `I should use ${tool} now because step ${turn} needs it.` : '',
      tool_calls: [{call_id: cid, name: tool, input_json: JSON.stringify(input)}],
      usage: {prompt_tokens: String(500 + turn * 7), completion_tokens: String(20 + (turn % 13) * 5)},
      stop_reason: 'tool_use', latency_ms: '180', time_to_first_token_ms: '40'}, 180);
    if (turn === 1) add('sandbox_provisioned', {sandbox_id: 'sbx-ui-1', endpoint: 'unix:///run/x.sock', provision_ms: '90'}, 90);
    if (turn === Math.floor(events / 8)) {
      add('annotation', {author: 'harness', text: 'resumed by http://127.0.0.1:8080#2', labels: {kind: 'resume'}}, 1500);
    }
    add('tool_call', {call_id: cid, tool_name: tool, input_json: JSON.stringify(input), idempotent: tool !== 'bash' && tool !== 'edit_file',
      sandbox_id: tool === 'http_request' ? '' : 'sbx-ui-1'});
    const failed = turn % 10 === 7;
    add('tool_result', {call_id: cid, output: `${failed ? 'FAILED' : 'ok'} turn ${turn} ${filler}`, is_error: failed,
      exit_status: failed ? 1 : 0, duration_ms: String(30 + (turn % 5) * 20)}, 30 + (turn % 5) * 20);
  }
  add('sandbox_released', {sandbox_id: 'sbx-ui-1', reason: 'session ended'});
  add('status_change', {from: 'SESSION_STATUS_RUNNING', to: 'SESSION_STATUS_COMPLETED', reason: 'the model ended its turn'});
  return {id, ndjson: lines.join('\n') + '\n', events: seq};
}
