// Conformance: the official OpenAI Node SDK talks to a real hengshi gateway in front of a real
// hengshi-sim, exactly as an app would (only baseURL changes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { binDir, startListening, stopAll, tempDir } from './processes.mjs';

const sourceDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let client;

before(async () => {
  const simUrl = await startListening(join(binDir, 'tools/sim/hengshi-sim'),
    ['--listen', '127.0.0.1:0', '--name', 'sdk-sim', '--seed', '7']);
  const dir = tempDir('hengshi-sdk-');
  // The shipped demo FAQ, trained by the real CLI, so the SDK also meets edge answers.
  const trained = spawnSync(join(binDir, 'src/cli/hengshi'),
    ['train', '--data', join(sourceDir, 'data/demo_faq.jsonl'), '--out', join(dir, 'model'), '--search-budget', '0'],
    { encoding: 'utf8', timeout: 120000 });
  assert.equal(trained.status, 0, `hengshi train failed: ${trained.stdout}${trained.stderr}`);
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, [
    'server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0", threads: 1}',
    'log: {requests: ""}',
    'edge: {intent_model: "' + join(dir, 'model') + '"}',
    'pools:',
    '  cloud-small: {members: [{name: s1, base_url: "' + simUrl + '/v1", model: sim-small}]}',
    '  cloud-large: {members: [{name: l1, base_url: "' + simUrl + '/v1", model: sim-large}]}',
    '',
  ].join('\n'));
  const gatewayUrl = await startListening(join(binDir, 'src/cli/hengshi'), ['serve', '--config', config]);
  client = new OpenAI({ baseURL: gatewayUrl + '/v1', apiKey: 'not-needed-by-the-gateway', maxRetries: 0 });
});

after(() => stopAll());

test('chat.completions.create without stream returns the answer and hengshi metadata', async () => {
  const completion = await client.chat.completions.create({
    model: 'cloud-large',
    messages: [{ role: 'user', content: 'How do I reset my password?' }],
  });
  assert.equal(completion.object, 'chat.completion');
  assert.ok(completion.choices[0].message.content.length > 0);
  assert.equal(completion.choices[0].message.role, 'assistant');
  assert.ok(completion.usage.completion_tokens > 0);
  assert.equal(completion.hengshi.route, 'cloud-large');
  assert.equal(completion.hengshi.reason, 'model_pinned');
  assert.equal(completion.hengshi.upstream, 'l1');
  assert.equal(typeof completion.hengshi.overhead_us, 'number');
});

test('withResponse exposes the X-Hengshi headers', async () => {
  const { data, response } = await client.chat.completions
    .create({ model: 'cloud-small', messages: [{ role: 'user', content: 'hi' }] })
    .withResponse();
  assert.equal(response.headers.get('x-hengshi-route'), 'cloud-small');
  assert.equal(response.headers.get('x-hengshi-cache'), 'miss');
  assert.equal(data.hengshi.route, 'cloud-small');
});

test('chat.completions.create with stream yields text chunks and final hengshi metadata', async () => {
  const stream = await client.chat.completions.create({
    model: 'cloud-small',
    messages: [{ role: 'user', content: 'Tell me about shipping times' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let meta = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    for (const choice of chunk.choices) text += choice.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
    if (chunk.hengshi) meta = chunk.hengshi;
  }
  assert.ok(chunks >= 3, `expected several chunks, got ${chunks}`);
  assert.match(text, /\[sdk-sim\/sim-small\]/);
  assert.ok(usage && usage.completion_tokens > 0, 'include_usage was asked for, so usage arrives');
  assert.ok(meta, 'the final chunk carries the hengshi metadata');
  assert.equal(meta.route, 'cloud-small');
  assert.equal(meta.model, 'sim-small');
});

test('a cached answer replays through the SDK as a stream, from the cache', async () => {
  const ask = () => client.chat.completions.create({
    model: 'cloud-small',
    messages: [{ role: 'user', content: 'What is the warranty on laptops?' }],
    stream: true,
  }).withResponse();
  const collect = async (stream) => {
    let text = '';
    let meta = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      for (const choice of chunk.choices) text += choice.delta?.content ?? '';
      if (chunk.hengshi) meta = chunk.hengshi;
    }
    return { text, meta, chunks };
  };
  const first = await ask();
  const fresh = await collect(first.data);
  assert.equal(first.response.headers.get('x-hengshi-cache'), 'miss');
  const second = await ask();
  const cached = await collect(second.data);
  assert.equal(second.response.headers.get('x-hengshi-cache'), 'exact');
  assert.equal(cached.text, fresh.text, 'the same answer, replayed');
  assert.ok(cached.chunks >= 3, `replayed in pieces, got ${cached.chunks} chunks`);
  assert.equal(cached.meta.cache, 'exact');
  assert.equal(cached.meta.answered_by, 'cache');
});

test('bad input surfaces as the SDK error type with the OpenAI error body', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'cloud-small', messages: [] }),
    (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.status, 400);
      assert.equal(error.code, 'invalid_value');
      assert.equal(error.param, 'messages');
      return true;
    },
  );
});

test('an upstream failure mid-request reaches the SDK as an APIError, not a hang', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'cloud-small', messages: [{ role: 'user', content: '[[sim:error]]' }] }),
    (error) => {
      assert.ok(error instanceof OpenAI.APIError);
      assert.equal(error.status, 502);
      return true;
    },
  );
});

test('an edge answer reads like any other completion', async () => {
  const completion = await client.chat.completions.create({
    model: 'auto',
    messages: [{ role: 'user', content: '我的订单到哪了' }],
  });
  assert.equal(completion.object, 'chat.completion');
  assert.equal(completion.choices[0].message.role, 'assistant');
  assert.match(completion.choices[0].message.content, /我的订单/);
  assert.equal(completion.choices[0].finish_reason, 'stop');
  assert.ok(completion.usage.prompt_tokens > 0);
  assert.equal(completion.hengshi.route, 'edge');
  assert.equal(completion.hengshi.reason, 'high_confidence');
  assert.equal(completion.hengshi.intent, 'order_status');
  assert.match(completion.hengshi.model, /^intent:/);
});

test('an edge answer streams through the SDK with usage and the metadata chunk', async () => {
  const stream = await client.chat.completions.create({
    model: 'auto',
    messages: [{ role: 'user', content: 'I want a refund' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  let meta = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) text += choice.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
    if (chunk.hengshi) meta = chunk.hengshi;
  }
  assert.match(text, /退款|refund/i);
  assert.ok(usage && usage.completion_tokens > 0);
  assert.equal(meta.route, 'edge');
  assert.equal(meta.intent, 'refund_request');
});

test('a request with PII is answered without any cloud call', async () => {
  const completion = await client.chat.completions.create({
    model: 'cloud-large',
    messages: [{ role: 'user', content: 'my phone is 13812345678, change my address' }],
  });
  assert.equal(completion.hengshi.reason, 'pii_pin');
  assert.notEqual(completion.hengshi.route, 'cloud-large');
  assert.notEqual(completion.hengshi.route, 'cloud-small');
  assert.equal(completion.hengshi.upstream, null);
});
