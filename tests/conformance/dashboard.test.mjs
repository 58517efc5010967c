// The admin dashboard in a real browser: Debian's chromium, headless, driven by playwright-core,
// loads GET / from a real gateway's admin listener, and its charts and figures follow live
// traffic (sent through the public listener to a real hengshi-sim). A screenshot is saved as a
// test artifact: <build>/test-artifacts/dashboard.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { binDir, startGateway, startListening, stopAll, tempDir } from './processes.mjs';

const chromiumPath = '/usr/bin/chromium';
let gateway;
let context;
let profile;

const ask = (model, text) => fetch(gateway.url + '/v1/chat/completions', {
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ model, messages: [{ role: 'user', content: text }] }),
}).then((reply) => { assert.equal(reply.status, 200); return reply.json(); });

// Polls `predicate` in the page until it holds (bounded: the test's own timeout backs it).
const until = (page, predicate, arg) => page.waitForFunction(predicate, arg, { timeout: 20000, polling: 100 });

before(async () => {
  const simUrl = await startListening(join(binDir, 'tools/sim/hengshi-sim'),
    ['--listen', '127.0.0.1:0', '--name', 'dashboard-sim', '--seed', '5']);
  const dir = tempDir('hengshi-dashboard-');
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, [
    'server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0", threads: 1}',
    'log: {requests: ""}',
    'cache: {enabled: false}',
    'pools:',
    `  cloud-small: {members: [{name: s1, base_url: "${simUrl}/v1", model: sim-small, price_input_per_1k: 0.5, price_output_per_1k: 1.5}]}`,
    `  cloud-large: {members: [{name: l1, base_url: "${simUrl}/v1", model: sim-large, price_input_per_1k: 5, price_output_per_1k: 15}]}`,
    '',
  ].join('\n'));
  gateway = await startGateway(join(binDir, 'src/cli/hengshi'), ['serve', '--config', config]);
  // A fresh profile for every run (launchPersistentContext passes it as --user-data-dir).
  profile = mkdtempSync(join(tmpdir(), 'hengshi-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    viewport: { width: 1280, height: 900 },
  });
});

after(async () => {
  if (context) await context.close();
  await stopAll();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test('the dashboard renders live data that changes as traffic flows', async () => {
  const page = await context.newPage();
  const failures = [];
  page.on('pageerror', (error) => failures.push(error.message));
  page.on('requestfailed', (request) => failures.push('request failed: ' + request.url()));
  const response = await page.goto(gateway.adminUrl + '/?interval=200');
  assert.equal(response.status(), 200);
  assert.match(response.headers()['content-security-policy'], /default-src 'none'/);
  await until(page, () => window.hengshiDashboard && window.hengshiDashboard.polls >= 2);
  assert.equal(await page.textContent('#requests'), '0');

  // Traffic: cloud-small by default, and a few pinned to cloud-large.
  for (let i = 0; i < 8; i++) await ask('auto', `where is order ${i}?`);
  for (let i = 0; i < 3; i++) await ask('cloud-large', `hard question ${i}`);
  await until(page, () => document.getElementById('requests').textContent === '11');

  // The charts: the route-mix series saw requests per second for both pools, the latency chart
  // has a p95 for each; the tables list both routes and both breakers.
  const charts = await page.evaluate(() => {
    const { routes, latency } = window.hengshiDashboard.charts;
    const peak = (chart, name) => {
      const index = chart.series.findIndex((s) => s.label === name);
      return Math.max(0, ...chart.data[index].filter((v) => v !== null));
    };
    return {
      points: routes.data[0].length,
      small: peak(routes, 'cloud-small'),
      large: peak(routes, 'cloud-large'),
      latencySmall: peak(latency, 'cloud-small'),
      canvases: document.querySelectorAll('canvas').length,
    };
  });
  assert.ok(charts.points >= 3, JSON.stringify(charts));
  assert.ok(charts.small > 0, JSON.stringify(charts));
  assert.ok(charts.large > 0, JSON.stringify(charts));
  assert.ok(charts.latencySmall > 0, JSON.stringify(charts));
  assert.equal(charts.canvases, 2);
  const latencyTable = await page.textContent('#latency-table');
  assert.match(latencyTable, /cloud-small/);
  assert.match(latencyTable, /cloud-large/);
  assert.match(await page.textContent('#breaker-table'), /cloud-small\/s1\s*closed/);
  assert.equal(await page.textContent('#model-share'), '100.0%');
  assert.equal(await page.textContent('#mode'), 'online');
  // More traffic moves the numbers again: live, not a snapshot.
  await ask('auto', 'one more');
  await until(page, () => document.getElementById('requests').textContent === '12');
  assert.deepEqual(failures, []);

  const artifacts = join(binDir, 'test-artifacts');
  mkdirSync(artifacts, { recursive: true });
  const screenshot = join(artifacts, 'dashboard.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  assert.ok(statSync(screenshot).size > 10000);
});
