// The console's only way to the data: the public REST API and its event stream
// (docs/harness-openapi.yaml), with the API key kept in sessionStorage (this tab only).

const KEY = 'sinew.apiKey';

export function apiKey() {
  return sessionStorage.getItem(KEY) || '';
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

// An API error: `status` (0 for a network failure), `code` and `message` from the body.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Listeners told when the key is refused (the app then asks for another).
const unauthorizedListeners = [];
export function onUnauthorized(fn) {
  unauthorizedListeners.push(fn);
}

function headers(extra) {
  return Object.assign({Authorization: `Bearer ${apiKey()}`}, extra || {});
}

async function fail(res) {
  let code = 'http_' + res.status;
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body && body.error) ({code, message} = body.error);
  } catch (_) {
    // not JSON: keep the status line
  }
  if (res.status === 401) unauthorizedListeners.forEach((fn) => fn(message));
  return new ApiError(res.status, code, message);
}

// fetch() without the cache, a network failure as ApiError 'network' and a non-2xx
// answer as the API's error. An abort is passed through as is.
async function send(path, init) {
  let res;
  try {
    res = await fetch(path, {...init, cache: 'no-store'});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `the harness did not answer (${e.message})`);
  }
  if (!res.ok) throw await fail(res);
  return res;
}

// One JSON call. Throws ApiError.
export async function call(method, path, body, {signal} = {}) {
  const res = await send(path, {
    method,
    headers: headers(body === undefined ? {} : {'Content-Type': 'application/json'}),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  return res.json();
}

export function listSessions({status, limit = 50, pageToken = ''} = {}, opts) {
  const q = new URLSearchParams({limit: String(limit)});
  if (status) q.set('status', status);
  if (pageToken) q.set('page_token', pageToken);
  return call('GET', `/v1/sessions?${q}`, undefined, opts);
}

export const getSession = (id, opts) => call('GET', `/v1/sessions/${id}`, undefined, opts).then((r) => r.session);
export const getEvents = (id, after, limit, opts) =>
  call('GET', `/v1/sessions/${id}/events?after=${after}&limit=${limit}`, undefined, opts);
export const cancelSession = (id) => call('POST', `/v1/sessions/${id}/cancel`).then((r) => r.session);
// Ends a conversation that stays open (keep_open): now if it waits for input, else at the end of its turn.
export const closeSession = (id) => call('POST', `/v1/sessions/${id}/close`).then((r) => r.session);
// Approves or denies a tool call that waits for a decision; `message` goes to the model.
export function decide(id, callId, decision, message) {
  const d = {call_id: callId, decision};
  if (message) d.message = message;
  return call('POST', `/v1/sessions/${id}/decisions`, {decisions: [d]}).then((r) => r.session);
}
// Steers a session that has not ended: cuts the model or tool call under way and goes on with `message`.
export const interruptSession = (id, message) => call('POST', `/v1/sessions/${id}/interrupt`, {message});
export const sendMessage = (id, text) => call('POST', `/v1/sessions/${id}/messages`, {text}).then((r) => r.session);
// `n` sessions from events 1..atSeq (best-of-n); answers {session, sessions, sandbox}.
export function forkSession(id, atSeq, model, message, n = 1) {
  const body = {at_seq: atSeq};
  if (model) body.model = model;
  if (message) body.message = message;
  if (n > 1) body.n = n;
  return call('POST', `/v1/sessions/${id}/fork`, body);
}

// Reads the session's event stream from after `after` (sent as Last-Event-ID), calling
// onEvent(event) for each. Resolves when the server ends the stream; rejects on a
// network failure or an API error. onEvent also gets the event's JSON length. Abort with `signal`.
export async function streamEvents(id, after, onEvent, signal) {
  const res = await send(`/v1/sessions/${id}/events/stream`, {
    headers: headers({'Last-Event-ID': String(after), Accept: 'text/event-stream'}),
    signal,
  });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', `the event stream broke (${e.message})`);
    }
    if (chunk.done) return;
    buffer += chunk.value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
      }
      if (data.length) {
        const text = data.join('\n');
        onEvent(JSON.parse(text), text.length);
      }
    }
  }
}
