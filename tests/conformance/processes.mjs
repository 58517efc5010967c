// The real processes a conformance test talks to: hengshi and hengshi-sim started from the build
// folder (HENGSHI_BIN_DIR), each resolved once it prints "listening on http://...", all stopped
// by stopAll(), which also removes the folders made with tempDir().
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const binDir = process.env.HENGSHI_BIN_DIR;
if (!binDir) throw new Error('HENGSHI_BIN_DIR must point at the build folder');

const children = [];
const dirs = [];

// A fresh folder under the system's temp folder (configs, keys, logs), removed by stopAll().
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

// Starts a binary and resolves with its base URL once it prints "listening on http://...".
export function startListening(path, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(path, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${path} did not listen in 20 s: ${out}${err}`)), 20000);
    // hengshi-sim prints the line on stdout, hengshi on stderr (its stdout is for data).
    const look = () => {
      const match = (out + '\u001f' + err).match(/listening on (http:\/\/[^\s\u001f]+)\r?\n/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on('data', (data) => { out += data; look(); });
    child.stderr.on('data', (data) => { err += data; look(); });
    child.on('exit', (code) => reject(new Error(`${path} exited ${code}: ${out}${err}`)));
  });
}

// Starts hengshi with an admin listener; resolves with { url, adminUrl } once it printed both.
export function startGateway(path, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(path, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let text = '';
    const timer = setTimeout(() => reject(new Error(`${path} did not listen in 20 s: ${text}`)), 20000);
    const look = () => {
      const url = text.match(/hengshi listening on (http:\/\/[^\s]+)\r?\n/);
      const admin = text.match(/admin listening on (http:\/\/[^\s]+)\r?\n/);
      if (url && admin) {
        clearTimeout(timer);
        resolve({ url: url[1], adminUrl: admin[1] });
      }
    };
    child.stdout.on('data', (data) => { text += data; look(); });
    child.stderr.on('data', (data) => { text += data; look(); });
    child.on('exit', (code) => reject(new Error(`${path} exited ${code}: ${text}`)));
  });
}

// Stops every child, waits for each to exit (so none still writes into a temp folder), then
// removes the temp folders.
export async function stopAll() {
  await Promise.all(children.splice(0).map((child) => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', resolve);
    child.kill('SIGTERM');
  })));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}
