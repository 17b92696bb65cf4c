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
// violation banner; a copied link replays the run exactly; at 1280 and
// 390 px wide every guided scenario reaches its state (the checker's
// verdict, the leader, the highlighted entries) with no two interactive
// elements overlapping and nothing wider than the viewport. Screenshots
// go to the artifact dir.
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

function watch(p) {
  p.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
}

// What the page shows of a run, to compare a replay with the original.
const snapshot = (p) => p.evaluate(() => ({
  clock: document.querySelector('#clock').textContent,
  leader: document.querySelector('#leader').textContent,
  etag: document.querySelector('#lease-etag').textContent,
  lease: document.querySelector('#lease-body').textContent,
  protected: document.querySelector('#protected').textContent,
  counters: document.querySelector('#counters').textContent,
  nodes: document.querySelector('#nodes tbody').textContent,
  log: [...document.querySelectorAll('#log li')].slice(0, 40).map((li) => li.textContent),
}));

// No two visible interactive elements overlap (each clipped to the
// scrolling boxes it sits in), and nothing is wider than the viewport.
async function noOverlaps(p, width) {
  const found = await p.evaluate(() => {
    const boxes = [];
    for (const el of document.querySelectorAll('button, input, select, li[tabindex]')) {
      let r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0 || el.closest('[hidden]')) continue;
      let box = { l: r.left, t: r.top, r: r.right, b: r.bottom };
      for (let a = el.parentElement; a; a = a.parentElement) {
        const o = getComputedStyle(a);
        if (o.overflowX === 'visible' && o.overflowY === 'visible') continue;
        const c = a.getBoundingClientRect();
        box = { l: Math.max(box.l, c.left), t: Math.max(box.t, c.top), r: Math.min(box.r, c.right), b: Math.min(box.b, c.bottom) };
      }
      if (box.r - box.l < 1 || box.b - box.t < 1) continue;
      const name = `${el.tagName.toLowerCase()}#${el.id || ''}[${(el.getAttribute('aria-label') || el.textContent || '').trim().slice(0, 30)}]`;
      boxes.push({ name, ...box });
    }
    const clashes = [];
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        const w = Math.min(a.r, b.r) - Math.max(a.l, b.l);
        const h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
        if (w > 0.5 && h > 0.5) clashes.push(`${a.name} and ${b.name}`);
      }
    }
    return { clashes, scrollWidth: document.documentElement.scrollWidth };
  });
  if (found.clashes.length) throw new Error(`overlapping at ${width} px: ${found.clashes.slice(0, 5).join('; ')}`);
  if (found.scrollWidth > width + 1) throw new Error(`the page is ${found.scrollWidth} px wide at ${width} px`);
}

const expect = (cond, what, got) => { if (!cond) throw new Error(`${what}: ${JSON.stringify(got)}`); };
const hasHl = (got, text) => got.highlighted.some((t) => t.includes(text));
const hasReq = (got, text) => got.requests.some((t) => t.includes(text));

// What each guided scenario must reach, judged from what the page shows.
const SCENARIO_CHECKS = {
  'retry-412': (g) => {
    expect(g.verdict === 'safe' && g.node === '2' && g.token === '1', 'node-2 leads on with token 1', g);
    expect(hasHl(g, 'server-error 500') && hasHl(g, 'renewed, token 1'), 'the 500 and the renewal highlighted', g);
  },
  'pause-fence': (g) => {
    expect(g.verdict === 'safe' && g.naive === 'violated', 'safe, and the naive run violated', g);
    expect(g.fenced && g.token === '2', 'the zombie write refused under token 2', g);
    expect(hasHl(g, 'fenced write refused'), 'the refusal highlighted', g);
  },
  'clock-skew': (g) => {
    expect(g.verdict === 'safe' && g.naive === 'violated' && g.token === '1', 'safe with token 1, naive violated', g);
  },
  'lost-reply': (g) => {
    expect(g.verdict === 'safe' && g.token === '1', 'token 1', g);
    expect(hasHl(g, 'reply lost') && hasHl(g, 'acquired, token 1'), 'the lost reply and the acquisition highlighted', g);
  },
  'throttled': (g) => {
    expect(g.verdict === 'safe' && g.token === '1' && hasHl(g, 'throttled'), 'throttled, token 1', g);
  },
  'crash-takeover': (g) => {
    expect(g.verdict === 'safe' && g.token === '2' && g.node !== '2', 'another node with token 2', g);
    expect(hasHl(g, 'acquired, token 2'), 'the takeover highlighted', g);
  },
  'unsafe-store': (g) => {
    expect(g.verdict === 'safe' && g.naive === 'violated', 'refused; with the probe off, violated', g);
    expect(g.jobs.length === 2 && g.jobs.every((r) => r.class === 'error' && r.outcome.includes('second_create_refused')),
      'both runs refused the store', g);
  },
  'protocol-cas': (g) => {
    expect(hasReq(g, 'PUT leases/sim If-None-Match: *') && hasReq(g, 'PUT leases/sim If-Match:'), 'create then If-Match renewals', g);
  },
  'protocol-epochs': (g) => {
    expect(hasReq(g, 'LIST leases/sim') && hasReq(g, 'PUT leases/sim/00000000000000000001.json If-None-Match: *')
      && hasReq(g, 'PUT leases/sim/00000000000000000002.json If-None-Match: *'), 'LIST, epoch creates', g);
  },
  'protocol-mutex': (g) => {
    // Its token is the store's clock in ms, not a counter.
    expect(hasReq(g, 'PUT leases/sim If-None-Match: *') && Number(g.token) > 1.7e12, 'a create, a clock token', g);
  },
};

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

  await step('a copied link replays the run exactly', async () => {
    await page.goto(url);
    await waitLeader(() => document.querySelector('#leader').dataset.token === '1');
    await page.selectOption('#speed', '5');
    const old = await leader();
    await page.click(`#nodes button[data-action="kill"][data-node="${old.node}"]`);
    await waitLeader(() => document.querySelector('#leader').dataset.token === '2');
    await page.click('#run'); // pause
    // A seed typed but not applied (no New world) is not the run's.
    await page.fill('#seed', '7');
    await page.click('#copy-link');
    const link = await page.inputValue('#share');
    if (!/#p=cas&.*seed=1&.*a=kill\.\d\.\d+@\d+.*&t=\d+/.test(decodeURIComponent(link))) throw new Error(`link: ${link}`);
    const seen = await snapshot(page);
    const again = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    watch(again);
    await again.goto(link);
    await again.waitForFunction((c) => document.querySelector('#clock').textContent === c, seen.clock);
    const replayed = await snapshot(again);
    if (JSON.stringify(replayed) !== JSON.stringify(seen)) {
      throw new Error(`replayed ${JSON.stringify(replayed)}\n  shown ${JSON.stringify(seen)}`);
    }
    await again.close();
  });

  for (const width of [1280, 390]) {
    const narrow = await browser.newPage({ viewport: { width, height: 900 } });
    watch(narrow);
    await narrow.goto(url);
    await narrow.waitForSelector('#scenarios button');
    for (const [id, check] of Object.entries(SCENARIO_CHECKS)) {
      await step(`scenario ${id} at ${width} px`, async () => {
        await narrow.click(`#scenarios button[data-scenario="${id}"]`);
        await narrow.waitForSelector(`#story[data-scenario="${id}"]:not([hidden])`);
        const got = await narrow.evaluate(() => ({
          verdict: document.querySelector('#story').dataset.verdict,
          naive: document.querySelector('#story').dataset.naiveVerdict || null,
          node: document.querySelector('#leader').dataset.node ?? null,
          token: document.querySelector('#leader').dataset.token ?? null,
          fenced: !document.querySelector('#fenced').hidden,
          violation: !document.querySelector('#violation').hidden,
          highlighted: [...document.querySelectorAll('#log li.hl, #requests li.hl')].map((li) => li.textContent),
          requests: [...document.querySelectorAll('#requests li')].map((li) => li.textContent),
          link: document.querySelector('#share').value,
          jobs: [...document.querySelectorAll('#jobs-runs tbody tr')]
            .map((tr) => ({ class: tr.dataset.class, outcome: tr.cells[3].textContent })),
        }));
        check(got);
        if (!got.link.includes(`scenario=${id}`)) throw new Error(`link: ${got.link}`);
        if (got.verdict === 'safe' && got.violation) throw new Error('violation banner in a safe run');
        await noOverlaps(narrow, width);
      });
    }
    await step(`the scheduled-job view at ${width} px`, async () => {
      await narrow.selectOption('#speed', '10');
      if (await narrow.isHidden('#jobs')) await narrow.click('#jobs-open');
      await narrow.waitForFunction(() => document.querySelector('#jobs-clock').textContent.startsWith('t ='));
      if (await narrow.getAttribute('#run', 'aria-pressed') === 'false') await narrow.click('#run');
      await narrow.selectOption('#jobs-store', 'safe');
      await narrow.check('#jobs-probe');
      await narrow.fill('#jobs-tick', '1');
      await narrow.fill('#jobs-node', '0');
      await narrow.click('#jobs-reset');
      const classes = () => narrow.evaluate(() => [...document.querySelectorAll('#jobs-runs tbody tr')]
        .map((tr) => `${tr.cells[1].textContent} ${tr.cells[2].textContent} ${tr.dataset.class}`).reverse());
      const until = (want) => narrow.waitForFunction((w) => {
        const got = [...document.querySelectorAll('#jobs-runs tbody tr')]
          .map((tr) => `${tr.cells[1].textContent} ${tr.cells[2].textContent} ${tr.dataset.class}`).reverse();
        return JSON.stringify(got) === JSON.stringify(w);
      }, want, { timeout: 20000 }).catch(async () => {
        throw new Error(`runs ${JSON.stringify(await classes())}, wanted ${JSON.stringify(want)}`);
      });
      // Tick 1 to two instances at once: one runs, the other is skipped.
      await narrow.click('#jobs-duplicate');
      await until(['instance-0 tick-1 ran', 'instance-1 tick-1 skipped']);
      // Delivered again later: it already ran.
      await narrow.click('#jobs-deliver');
      await until(['instance-0 tick-1 ran', 'instance-1 tick-1 skipped', 'instance-0 tick-1 already-ran']);
      // Tick 2 with time for half the 10 s job: stopped, the tick left open.
      await narrow.fill('#jobs-tick', '2');
      await narrow.click('#jobs-late');
      await until(['instance-0 tick-1 ran', 'instance-1 tick-1 skipped', 'instance-0 tick-1 already-ran',
        'instance-0 tick-2 stopped']);
      const record = await narrow.textContent('#jobs-record');
      if (!record.includes('completed ticks: tick-1') || record.includes('tick-2')) throw new Error(`record: ${record}`);
      const verdict = await narrow.getAttribute('#jobs-verdict', 'data-verdict');
      if (verdict !== 'safe') throw new Error(`verdict ${verdict}`);
      await noOverlaps(narrow, width);
    });
    await narrow.screenshot({ path: join(artifacts, `demo-${width}px.png`), fullPage: true });
    await narrow.close();
  }

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
console.log(`e2e: ${steps.length} steps passed; screenshots in ${artifacts}/ (demo-naive-violation, demo-1280px, demo-390px)`);
