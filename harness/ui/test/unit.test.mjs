// The console's pure modules under node: the event model (spans, marks, tokens, file
// changes) and the line diff.
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {SessionModel, statusName} from '../model.js';
import {diffLines, withContext} from '../diff.js';
import {makeSession} from './stack.mjs';

function parse(ndjson) {
  return ndjson.trim().split('\n').map((l) => JSON.parse(l));
}

test("a session's events become spans, marks, turns and file changes, in any arrival order", () => {
  const {ndjson, events} = makeSession({events: 200});
  const all = parse(ndjson);
  const inOrder = new SessionModel();
  inOrder.add(all);
  const shuffled = new SessionModel();
  shuffled.add(all.slice(100).map((e) => ({...e})));
  assert.equal(shuffled.lastSeq, 0);  // waits for the hole before event 101
  shuffled.add(all.slice(0, 100).map((e) => ({...e})));
  shuffled.add(all.slice(0, 10).map((e) => ({...e})));  // duplicates ignored
  for (const m of [inOrder, shuffled]) {
    assert.equal(m.lastSeq, events);
    assert.equal(m.count, events);
    assert.equal(m.status, 'completed');
    const turns = all.filter((e) => e.type === 'model_response').length;
    assert.equal(m.turns.length, turns);
    assert.equal(m.spans.filter((s) => s.lane === 0).length, turns);
    assert.equal(m.spans.filter((s) => s.lane === 1).length, all.filter((e) => e.type === 'tool_call').length);
    assert.ok(m.spans.every((s) => !s.open));
    assert.equal(m.spans.filter((s) => s.lane === 2).length, 1);
    assert.ok(m.marks.some((k) => k.kind === 'takeover'));
    assert.equal(m.tokens.prompt, all.filter((e) => e.type === 'model_response')
      .reduce((a, e) => a + Number(e.model_response.usage.prompt_tokens), 0));
    const changes = m.files.get('/workspace/notes.txt');
    assert.ok(changes.length > 10);
    // After the first write the content is known, so edits show the whole file.
    assert.ok(changes.slice(1).every((c) => c.knownBefore));
  }
  assert.deepEqual(shuffled.spans.map((s) => [s.seq, s.endSeq, s.outcome]), inOrder.spans.map((s) => [s.seq, s.endSeq, s.outcome]));
});

test("statuses as events spell them read as the API's names", () => {
  assert.equal(statusName('SESSION_STATUS_WAITING_FOR_INPUT'), 'waiting_for_input');
  assert.equal(statusName(undefined), '');
});

test('a model call made again after a crash closes the first as interrupted', () => {
  const m = new SessionModel();
  const ev = (seq, type, p, ts) => ({seq: String(seq), type, timestamp_unix_ms: String(ts), [type]: p});
  m.add([ev(1, 'session_created', {task_json: '{}'}, 1000), ev(2, 'model_request', {request_id: 'r1'}, 1010),
    ev(3, 'annotation', {labels: {kind: 'resume'}}, 5000), ev(4, 'model_request', {request_id: 'r1'}, 5010),
    ev(5, 'model_response', {request_id: 'r1', usage: {completion_tokens: '7'}}, 5100)]);
  assert.deepEqual(m.spans.map((s) => [s.seq, s.endSeq, s.outcome]), [[2, 4, 'interrupted'], [4, 5, 'end_turn']]);
  assert.equal(m.tokens.completion, 7);
});

test('the line diff keeps common lines and marks the rest', () => {
  const d = diffLines('a\nb\nc\nd\n', 'a\nB\nc\nd\ne\n');
  assert.deepEqual(d.map((l) => l.op + l.text), [' a', '-b', '+B', ' c', ' d', '+e']);
  assert.deepEqual(diffLines('', 'x\n').map((l) => l.op + l.text), ['+x']);
  const long = Array.from({length: 50}, (_, i) => `l${i}`).join('\n');
  const ctx = withContext(diffLines(long, long.replace('l25', 'L25')));
  assert.deepEqual(ctx.map((l) => l.op), ['…', ' ', ' ', ' ', '-', '+', ' ', ' ', ' ', '…']);
  // Past the cell limit it gives up aligning but still shows every line.
  const big = diffLines('a\nb\n', 'c\nd\n', 1);
  assert.deepEqual(big.map((l) => l.op + l.text), ['-a', '-b', '+c', '+d']);
});

test('tool calls waiting for a decision are those of the last response asked about and not decided', () => {
  const m = new SessionModel();
  let seq = 0;
  const ev = (type, payload) => ({seq: String(++seq), timestamp_unix_ms: String(1000 + seq), type, [type]: payload});
  m.add([
    ev('session_created', {task_json: '{}'}),
    ev('model_response', {request_id: 'r1', tool_calls: [{call_id: 'a'}, {call_id: 'b'}]}),
    ev('approval_requested', {call_id: 'a', tool_name: 'bash', input_json: '{"command":"rm x"}', reason: 'ask'}),
    ev('approval_requested', {call_id: 'b', tool_name: 'http_request', input_json: '{}', reason: 'ask'}),
    ev('status_change', {from: 'SESSION_STATUS_RUNNING', to: 'SESSION_STATUS_REQUIRES_ACTION'}),
  ]);
  assert.equal(m.status, 'requires_action');
  assert.deepEqual([...m.approvals.keys()], ['a', 'b']);
  assert.equal(m.approvals.get('a').tool_name, 'bash');
  m.add([ev('approval_decided', {call_id: 'a', approved: true, by: 'user'})]);
  assert.deepEqual([...m.approvals.keys()], ['b']);
  assert.ok(m.marks.some((k) => k.kind === 'approval' && k.label.startsWith('approved by user')));
  m.add([ev('model_response', {request_id: 'r2'})]);
  assert.equal(m.approvals.size, 0);
});
