// The demo page end to end, in Debian's Chromium driven by playwright-core.
//
//   node tests/web/e2e.mjs <built demo dir> <artifact dir>
//
// Serves the built demo with the server `make demo` uses (python3
// http.server on 127.0.0.1, a free port), stopped by its own PID whatever
// happens; then: the page loads with no console errors, 3 nodes elect a
// leader, killing it elects another with token + 1, requests render (and
// sign), the protocol selector works, a zombie's write after a pause is
// refused by fencing, and the naive variant with a clock step shows the
// violation banner. Screenshots go to the artifact dir.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';

const [dir, artifacts] = process.argv.slice(2);
if (!dir || !artifacts) {
  console.error('usage: node tests/web/e2e.mjs <built demo dir> <artifact dir>');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

function onPath(name) {
  for (const d of (process.env.PATH || '').split(delimiter)) {
    try {
      accessSync(join(d, name), constants.X_OK);
      return join(d, name);
    } catch (_) { /* next */ }
  }
  throw new Error(`${name} is not on PATH (make setup-browser installs it)`);
}

const server = spawn('python3', ['-u', '-m', 'http.server', '--bind', '127.0.0.1', '--directory', dir, '0'],
  { stdio: ['ignore', 'pipe', 'pipe'] });
const stopServer = () => { if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM'); };
process.on('exit', stopServer);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stopServer(); process.exit(130); });

const port = await new Promise((resolve, reject) => {
  let seen = '';
  const timer = setTimeout(() => reject(new Error(`http.server did not start: ${seen}`)), 10000);
  const read = (chunk) => {
    seen += chunk;
    const m = seen.match(/port (\d+)/);
    if (m) { clearTimeout(timer); resolve(Number(m[1])); }
  };
  server.stdout.on('data', read);
  server.stderr.on('data', read);
  server.on('exit', (code) => reject(new Error(`http.server exited (${code}): ${seen}`)));
});
const url = `http://127.0.0.1:${port}/`;

const browser = await chromium.launch({
  executablePath: onPath('chromium'),
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-dev-shm-usage'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const problems = [];
page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));

const steps = [];
async function step(name, fn) {
  const started = Date.now();
  await fn();
  steps.push(`${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}
const leader = async () => ({
  node: await page.getAttribute('#leader', 'data-node'),
  token: await page.getAttribute('#leader', 'data-token'),
});
const waitLeader = (pred, arg, timeout = 30000) => page.waitForFunction(pred, arg, { timeout });

let failed = false;
try {
  await step('loads and elects a leader with token 1', async () => {
    await page.goto(url);
    await waitLeader(() => document.querySelector('#leader').dataset.token === '1');
  });
  await page.selectOption('#speed', '5');

  await step('killing the leader elects another with token 2', async () => {
    const old = await leader();
    await page.click(`#nodes button[data-action="kill"][data-node="${old.node}"]`);
    await waitLeader((o) => {
      const d = document.querySelector('#leader').dataset;
      return d.node !== undefined && d.node !== o && d.token === '2';
    }, old.node);
    const row = await page.textContent(`#nodes tbody tr:nth-child(${Number(old.node) + 1})`);
    if (!row.includes('killed')) throw new Error(`killed node's row says: ${row}`);
    if (!await page.isHidden('#violation')) throw new Error('violation banner shown in the safe protocol');
  });

  await step('requests render as S3 HTTP, signed on demand', async () => {
    const plain = await page.textContent('#request-detail');
    if (!/^(GET|PUT|DELETE) \/(leases\/sim|data\/protected)/.test(plain) || !plain.includes('HTTP/1.1')) {
      throw new Error(`request detail: ${plain}`);
    }
    await page.check('#sign');
    await page.waitForFunction(() => document.querySelector('#request-detail').textContent
      .includes('authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/'));
  });

  await step('the epochs protocol elects a leader too', async () => {
    await page.selectOption('#protocol', 'epochs');
    await waitLeader(() => document.querySelector('#leader').dataset.token !== undefined);
    const key = await page.textContent('#lease-key');
    if (!key.includes('<epoch>')) throw new Error(`lease key: ${key}`);
    await page.selectOption('#protocol', 'cas');
  });

  await step('a zombie write after a pause is refused by fencing', async () => {
    await page.click('#reset');
    await waitLeader(() => document.querySelector('#leader').dataset.token === '1');
    const { node } = await leader();
    await page.fill('#pause-seconds', '20');
    await page.click(`#nodes button[data-action="pause_before_write"][data-node="${node}"]`);
    await page.waitForSelector('#fenced:not([hidden])', { timeout: 30000 });
    if (!await page.isHidden('#violation')) throw new Error('violation banner shown in the safe protocol');
  });

  await step('naive with a clock step shows the violation banner', async () => {
    await page.check('#naive');
    await waitLeader(() => document.querySelector('#leader').dataset.token === '1');
    const { node } = await leader();
    await page.fill('#offset-seconds', '25');
    await page.click(`#nodes button[data-action="offset"][data-node="${(Number(node) + 1) % 3}"]`);
    await page.waitForSelector('#violation:not([hidden])', { timeout: 30000 });
    const text = await page.textContent('#violation');
    if (!text.includes('two holders')) throw new Error(`banner: ${text}`);
    await page.screenshot({ path: join(artifacts, 'demo-naive-violation.png'), fullPage: true });
  });

  if (problems.length) throw new Error(`the page reported:\n  ${problems.join('\n  ')}`);
} catch (e) {
  failed = true;
  console.error(`e2e FAILED after: ${steps.join('; ') || 'nothing'}\n${e.stack || e}`);
  if (problems.length) console.error(problems.join('\n'));
  await page.screenshot({ path: join(artifacts, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await browser.close();
  stopServer();
}
if (failed) process.exit(1);
for (const s of steps) console.log(`ok: ${s}`);
console.log(`e2e: ${steps.length} steps passed; screenshot in ${artifacts}/demo-naive-violation.png`);
