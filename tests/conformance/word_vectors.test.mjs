// scripts/word-vectors-from-wink.mjs turns the npm word-vector package's JSON into the .vec file
// `hengshi train --word-vectors` reads. A small file in the package's layout (words most frequent
// first; each vector followed by its l2 norm and index) goes through the script and then through
// `hengshi train`, whose model takes the file's width.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { binDir } from './processes.mjs';

const source = new URL('../../', import.meta.url).pathname;
const script = join(source, 'scripts/word-vectors-from-wink.mjs');
const dir = mkdtempSync(join(tmpdir(), 'hengshi-word-vectors-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const width = 4;
const words = ['order', 'refund', 'password', 'two words', 'hours', 'parcel'];
const pack = {
  precision: 8, l2NormIndex: width, wordIndex: width + 1, size: words.length, dimensions: width, words,
  vectors: Object.fromEntries(words.map((w, i) => [w, [i, i + 0.5, -i, 0.25, 9.99, i]])),
};
const input = join(dir, 'pack.json');
writeFileSync(input, JSON.stringify(pack));

test('keeps the most frequent words, drops the bookkeeping entries and words with spaces', () => {
  const out = join(dir, 'top.vec');
  execFileSync(process.execPath, [script, input, out, '4']);
  const lines = readFileSync(out, 'utf8').trimEnd().split('\n');
  assert.equal(lines[0], `4 ${width}`);
  assert.deepEqual(lines.slice(1).map((l) => l.split(' ')[0]), ['order', 'refund', 'password', 'hours']);
  assert.equal(lines[2], 'refund 1 1.5 -1 0.25');
  for (const line of lines.slice(1)) assert.equal(line.split(' ').length, width + 1);
});

test('refuses a file that is not the package layout, and leaves no output', () => {
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ words: ['a'] }));
  const run = spawnSync(process.execPath, [script, bad, join(dir, 'bad.vec')], { encoding: 'utf8' });
  assert.equal(run.status, 1);
  assert.match(run.stderr, /not a wink embeddings file/);
  assert.throws(() => readFileSync(join(dir, 'bad.vec')));
});

test('hengshi train starts from the converted vectors and takes their width', () => {
  const vec = join(dir, 'all.vec');
  execFileSync(process.execPath, [script, input, vec]);
  const model = join(dir, 'model');
  execFileSync(join(binDir, 'src/cli/hengshi'), ['train', '--data', join(source, 'tests/edge/fixtures/intent_small.jsonl'),
    '--out', model, '--search-budget', '0', '--word-vectors', vec], { stdio: 'pipe' });
  const manifest = JSON.parse(readFileSync(join(model, 'manifest.json'), 'utf8'));
  assert.equal(manifest.hyperparameters.dim, width);
  assert.equal(manifest.hyperparameters.pretrained_vectors, 'all.vec');
  assert.equal(manifest.training.word_vectors_file, vec);
});
