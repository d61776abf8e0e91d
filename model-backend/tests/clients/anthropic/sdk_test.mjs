// sinew-model's Messages API through Anthropic's official TypeScript SDK (@anthropic-ai/sdk,
// pinned by package-lock.json): starts the real sinew-model with stories260K on loopback and
// drives it as any SDK user would. ctest: sinew_model_anthropic_sdk.
// Exits 77 (ctest SKIP_RETURN_CODE) with the reason when node_modules is absent (npm ci here;
// scripts/install-deps.sh does it).
// Env: SINEW_BIN_DIR (build/bin), SINEW_SOURCE_DIR (the checkout; the model is
// ../shared/models/stories260K.gguf from it).
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {existsSync} from 'node:fs';
import {dirname, join, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, 'node_modules', '@anthropic-ai', 'sdk'))) {
  console.log(`SKIPPED: ${here}/node_modules is absent (run scripts/install-deps.sh, or npm ci there)`);
  process.exit(77);
}
const {default: Anthropic} = await import('@anthropic-ai/sdk');

const source = resolve(process.env.SINEW_SOURCE_DIR || join(here, '../../../..'));
const binary = join(process.env.SINEW_BIN_DIR || join(source, 'build/bin'), 'sinew-model');
const model = join(source, '../shared/models/stories260K.gguf');
assert.ok(existsSync(binary), `${binary} is missing: build the sinew-model target`);
assert.ok(existsSync(model), `${model} is missing`);

// Starts sinew-model on a free loopback port; resolves with the process and its port.
function startServer() {
  return new Promise((resolvePort, reject) => {
    const child = spawn(binary, ['--model', model, '--port', '0', '--grpc-port', '-1', '--threads', '1'],
                        {stdio: ['ignore', 'pipe', 'inherit']});
    let out = '';
    child.stdout.on('data', (data) => {
      out += data;
      const match = /http listening on [^:\s]+:(\d+)/.exec(out);
      if (match) resolvePort({child, port: Number(match[1])});
    });
    child.on('exit', (code) => reject(new Error(`sinew-model exited (${code}) before listening: ${out}`)));
  });
}

const {child, port} = await startServer();
const client = new Anthropic({baseURL: `http://127.0.0.1:${port}`, apiKey: 'unused', maxRetries: 0});
const MODEL = 'stories260K';
const user = (text) => [{role: 'user', content: text}];
const weather = {
  name: 'get_weather', description: 'Weather in a city',
  input_schema: {type: 'object', properties: {city: {type: 'string', maxLength: 10},
                 unit: {enum: ['celsius', 'fahrenheit']}}, required: ['city', 'unit']},
};

const checks = [];
const check = (name, fn) => checks.push({name, fn});

check('messages.create answers a text block with usage', async () => {
  const message = await client.messages.create({
    model: MODEL, max_tokens: 16, temperature: 0, system: 'Tell a story.',
    messages: user('Once upon a time'), metadata: {user_id: 'sdk-test'},
  });
  assert.match(message.id, /^msg_/);
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.model, MODEL);
  assert.equal(message.content.length, 1);
  assert.equal(message.content[0].type, 'text');
  assert.ok(message.content[0].text.length > 0);
  assert.equal(message.stop_reason, 'max_tokens');
  assert.equal(message.stop_sequence, null);
  assert.equal(message.usage.output_tokens, 16);
  assert.ok(message.usage.input_tokens > 0);
});

check('messages.stream events and finalMessage equal the plain answer', async () => {
  const params = {model: MODEL, max_tokens: 16, temperature: 0, messages: user('Once upon a time')};
  const plain = await client.messages.create(params);
  const stream = client.messages.stream(params);
  const seen = [];
  let text = '';
  stream.on('streamEvent', (event) => seen.push(event.type));
  stream.on('text', (delta) => { text += delta; });
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, plain.content);
  assert.equal(text, plain.content[0].text);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.deepEqual(final.usage.input_tokens, plain.usage.input_tokens);
  assert.equal(final.usage.output_tokens, 16);
  assert.equal(seen[0], 'message_start');
  assert.equal(seen[1], 'content_block_start');
  assert.deepEqual(seen.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
});

check('tools with tool_choice tool answer a tool_use block, and its tool_result goes back', async () => {
  const message = await client.messages.create({
    model: MODEL, max_tokens: 120, messages: user('Weather in Oslo?'),
    tools: [weather], tool_choice: {type: 'tool', name: 'get_weather'},
  });
  assert.equal(message.stop_reason, 'tool_use');
  const use = message.content.find((block) => block.type === 'tool_use');
  assert.ok(use, JSON.stringify(message.content));
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input.city, 'string');
  assert.ok(['celsius', 'fahrenheit'].includes(use.input.unit), JSON.stringify(use.input));
  const next = await client.messages.create({
    model: MODEL, max_tokens: 8, tools: [weather],
    messages: [...user('Weather in Oslo?'), {role: 'assistant', content: message.content},
               {role: 'user', content: [{type: 'tool_result', tool_use_id: use.id, content: '5 C'}]}],
  });
  assert.equal(next.role, 'assistant');
  assert.ok(next.usage.input_tokens > message.usage.input_tokens);
});

check('a streamed tool_use (tool_choice any) arrives as input_json_delta', async () => {
  const stream = client.messages.stream({
    model: MODEL, max_tokens: 120, messages: user('Weather?'), tools: [weather],
    tool_choice: {type: 'any'},
  });
  let pieces = 0;
  stream.on('inputJson', () => { pieces += 1; });
  const final = await stream.finalMessage();
  assert.equal(final.stop_reason, 'tool_use');
  const use = final.content.find((block) => block.type === 'tool_use');
  assert.ok(use, JSON.stringify(final.content));
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input.city, 'string');
  assert.ok(pieces > 1, `the input arrives in pieces (${pieces})`);
});

check('messages.countTokens counts the prompt a message would get', async () => {
  const params = {model: MODEL, messages: user('Once upon a time')};
  const counted = await client.messages.countTokens(params);
  const message = await client.messages.create({...params, max_tokens: 1});
  assert.equal(counted.input_tokens, message.usage.input_tokens);
  const withTools = await client.messages.countTokens({...params, tools: [weather]});
  assert.ok(withTools.input_tokens > counted.input_tokens);
});

check('errors raise the SDK error class of their status', async () => {
  await assert.rejects(
    client.messages.create({model: 'claude-nope', max_tokens: 8, messages: user('hi')}),
    (error) => error instanceof Anthropic.NotFoundError && error.status === 404 &&
               error.error?.error?.type === 'not_found_error');
  await assert.rejects(
    client.messages.create({model: MODEL, max_tokens: 8, messages: [{role: 'system', content: 'x'}]}),
    (error) => error instanceof Anthropic.BadRequestError && error.status === 400 &&
               error.error?.error?.type === 'invalid_request_error' && /role/.test(error.message));
  await assert.rejects(
    client.messages.create({model: MODEL, max_tokens: 8, messages: [
      {role: 'user', content: [{type: 'tool_result', tool_use_id: 'toolu_none', content: 'x'}]}]}),
    (error) => error instanceof Anthropic.BadRequestError && /tool_use_id/.test(error.message));
});

let failed = 0;
try {
  for (const {name, fn} of checks) {
    try {
      await fn();
      console.log(`ok - ${name}`);
    } catch (error) {
      failed += 1;
      console.log(`not ok - ${name}\n${error.stack || error}`);
    }
  }
} finally {
  child.removeAllListeners('exit');
  child.kill('SIGTERM');
}
console.log(`${checks.length - failed} of ${checks.length} passed`);
process.exit(failed === 0 ? 0 : 1);
