// Conformance: a fine-tuned edge LLM answers through the official OpenAI Node SDK. The test
// fine-tunes a LoRA adapter on three demo FAQ intents (`hengshi finetune`, the fine-tunable test
// model), serves it for task type faq, and asks through the SDK: the faq answers come from the
// adapter (named in the metadata) and carry far more of the expected answer than the random
// base's; the streamed answer (greedy) is the same text; another task type gets the base.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { binDir, startListening, stopAll, tempDir } from './processes.mjs';

const hengshi = join(binDir, 'src/cli/hengshi');
const source = new URL('../../', import.meta.url).pathname;
let client;
const faq = [];  // {question, answer}

// Distinct CJK characters of `expected` that occur in `text`.
const shared = (text, expected) => new Set([...expected].filter((c) => c >= '\u4e00' && text.includes(c))).size;

before(async () => {
  const dir = tempDir('hengshi-sdk-finetune-');
  // Three intents, two questions each (the second takes its intent's answer).
  const taken = new Map();
  const rows = [];
  for (const line of readFileSync(join(source, 'data/demo_faq.jsonl'), 'utf8').split('\n')) {
    if (!line) continue;
    const row = JSON.parse(line);
    if (taken.size === 3 && !taken.has(row.intent)) continue;
    taken.set(row.intent, (taken.get(row.intent) ?? 0) + 1);
    if (taken.get(row.intent) > 2) continue;
    rows.push(line);
    if (row.answer) faq.push({ question: row.text, answer: row.answer });
  }
  writeFileSync(join(dir, 'faq.jsonl'), rows.join('\n') + '\n');
  const run = (args) => execFileSync(hengshi, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 240000 });
  run(['make-test-model', '--out', join(dir, 'base.gguf'), '--embedding', '256', '--feed-forward', '512',
    '--context', '256', '--vocab-corpus', join(source, 'data/demo_faq.jsonl'), '--f32', '--untied-output',
    '--seed', '42']);
  run(['finetune', '--base', join(dir, 'base.gguf'), '--data', join(dir, 'faq.jsonl'), '--out',
    join(dir, 'faq-lora'), '--output', 'lora', '--rank', '128', '--epochs', '50', '--lr', '2e-3',
    '--heldout', '0', '--eval-rows', '0', '--threads', '1', '--pack-rows']);
  const simUrl = await startListening(join(binDir, 'tools/sim/hengshi-sim'),
    ['--listen', '127.0.0.1:0', '--name', 'sdk-finetune-sim', '--seed', '12']);
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, [
    'server: {listen: "127.0.0.1:0", admin_listen: "", threads: 1}',
    'log: {requests: ""}',
    'cache: {enabled: false}',
    'edge:',
    '  llm:',
    `    model_path: ${join(dir, 'base.gguf')}`,
    '    threads: 1',
    '    max_tokens: 96',
    '    context_tokens: 256',
    `    adapters: {faq: ${join(dir, 'faq-lora')}}`,
    'pools:',
    '  cloud-small: {members: [{name: s1, base_url: "' + simUrl + '/v1", model: sim-small}]}',
    '  cloud-large: {members: [{name: l1, base_url: "' + simUrl + '/v1", model: sim-large}]}',
    '',
  ].join('\n'));
  const url = await startListening(hengshi, ['serve', '--config', config]);
  client = new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0 });
});

after(() => stopAll());

const ask = (question, taskType, stream = false) => client.chat.completions.create({
  model: 'edge-llm',
  messages: [{ role: 'user', content: question }],
  stream,
  hengshi: { task_type: taskType },
});

test('the fine-tuned adapter answers the FAQ through the SDK, streamed or not', async (t) => {
  let tunedShared = 0;
  let baseShared = 0;
  for (const { question, answer } of faq) {
    const tuned = await ask(question, 'faq');
    assert.match(tuned.hengshi.edge_model, /^base\.gguf\+faq@\d{8}T\d{6}Z-[0-9a-f]{8}$/);
    const text = tuned.choices[0].message.content;
    tunedShared += shared(text, answer);

    const base = await ask(question, 'billing');  // no adapter for this task type: the base
    assert.equal(base.hengshi.edge_model, 'base.gguf');
    baseShared += shared(base.choices[0].message.content, answer);

    let streamed = '';
    for await (const chunk of await ask(question, 'faq', true)) streamed += chunk.choices[0]?.delta?.content ?? '';
    assert.equal(streamed, text, 'greedy: the stream carries the same answer');
  }
  t.diagnostic(`shared characters with the expected answers: adapter ${tunedShared}, base ${baseShared}`);
  // Measured: 59 of the expected answers' characters for the adapter, 8 for the random base.
  assert.ok(tunedShared > 2 * baseShared + 10, `adapter ${tunedShared} vs base ${baseShared} shared characters`);
});
