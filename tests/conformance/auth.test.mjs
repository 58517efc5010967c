// Conformance: client keys as the official OpenAI Node SDK sees them (issue 8 §2) — a good key
// works, a bad key raises AuthenticationError, a key without the model PermissionDeniedError,
// an exhausted limit RateLimitError. maxRetries: 0, so a 429 is seen once, not retried.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { binDir, startListening, stopAll, tempDir } from './processes.mjs';

const keys = {
  good: 'sk-sdk-good-1f2e3d4c5b6a',
  smallOnly: 'sk-sdk-small-only-778899',
  limited: 'sk-sdk-limited-112233',
  broke: 'sk-sdk-broke-445566',
};
const sha256 = (text) => createHash('sha256').update(text).digest('hex');
let gatewayUrl;
const clientFor = (apiKey) => new OpenAI({ baseURL: gatewayUrl + '/v1', apiKey, maxRetries: 0 });
const ask = (client, model = 'cloud-small') =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Where is my order?' }] });

before(async () => {
  const simUrl = await startListening(join(binDir, 'tools/sim/hengshi-sim'),
    ['--listen', '127.0.0.1:0', '--name', 'sdk-auth-sim', '--seed', '11']);
  const dir = tempDir('hengshi-sdk-auth-');
  const keysFile = join(dir, 'keys.yaml');
  writeFileSync(keysFile, [
    'keys:',
    `  - {name: good, sha256: ${sha256(keys.good)}}`,
    `  - {name: small-only, sha256: ${sha256(keys.smallOnly)}, models: [cloud-small]}`,
    `  - {name: limited, sha256: ${sha256(keys.limited)}, rpm: 1}`,
    `  - {name: broke, sha256: ${sha256(keys.broke)}, budget: 0}`,
    '',
  ].join('\n'));
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, [
    `server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0", threads: 1, keys_file: "${keysFile}"}`,
    'log: {requests: ""}',
    'pools:',
    '  cloud-small: {members: [{name: s1, base_url: "' + simUrl + '/v1", model: sim-small, price_input_per_1k: 1}]}',
    '  cloud-large: {members: [{name: l1, base_url: "' + simUrl + '/v1", model: sim-large}]}',
    '',
  ].join('\n'));
  gatewayUrl = await startListening(join(binDir, 'src/cli/hengshi'), ['serve', '--config', config]);
});

after(() => stopAll());

test('a good key works and the answer names the key, not the key itself', async () => {
  const completion = await ask(clientFor(keys.good));
  assert.equal(typeof completion.choices[0].message.content, 'string');
  assert.equal(completion.hengshi.key, 'good');
  assert.ok(!JSON.stringify(completion).includes(keys.good));
});

test('a bad or missing key raises AuthenticationError (401 invalid_api_key)', async () => {
  for (const apiKey of ['sk-sdk-wrong-000000', sha256(keys.good)]) {
    await assert.rejects(ask(clientFor(apiKey)), (error) => {
      assert.ok(error instanceof OpenAI.AuthenticationError, `got ${error?.constructor?.name}`);
      assert.equal(error.status, 401);
      assert.equal(error.code, 'invalid_api_key');
      assert.equal(error.type, 'invalid_request_error');
      return true;
    });
  }
});

test('a key without the model raises PermissionDeniedError (403)', async () => {
  const client = clientFor(keys.smallOnly);
  await assert.rejects(ask(client, 'cloud-large'), (error) => {
    assert.ok(error instanceof OpenAI.PermissionDeniedError, `got ${error?.constructor?.name}`);
    assert.equal(error.status, 403);
    assert.equal(error.code, 'model_not_allowed');
    return true;
  });
  const allowed = await ask(client, 'cloud-small');
  assert.equal(allowed.hengshi.key, 'small-only');
});

test('an exhausted rate limit raises RateLimitError with Retry-After', async () => {
  const client = clientFor(keys.limited);
  await ask(client);
  await assert.rejects(ask(client), (error) => {
    assert.ok(error instanceof OpenAI.RateLimitError, `got ${error?.constructor?.name}`);
    assert.equal(error.status, 429);
    assert.equal(error.code, 'rate_limit_exceeded');
    assert.ok(Number(error.headers.get('retry-after')) >= 1);
    return true;
  });
});

test('a spent budget raises RateLimitError (insufficient_quota)', async () => {
  await assert.rejects(ask(clientFor(keys.broke)), (error) => {
    assert.ok(error instanceof OpenAI.RateLimitError, `got ${error?.constructor?.name}`);
    assert.equal(error.code, 'insufficient_quota');
    return true;
  });
});
