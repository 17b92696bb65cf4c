// The example Worker in workerd (Miniflare's Node API), against its R2
// binding and, by signed fetch, against moto with signature checking on.
//
//   node tests/cloudflare/worker.mjs <worker build dir>
//
// Run by tests/tests/cloudflare.rs, which starts moto (127.0.0.1, a free
// port, stopped by its PID) and passes it in MOTO_ENDPOINT, MOTO_BUCKET,
// MOTO_REGION, MOTO_KEY_ID, MOTO_SECRET. workerd listens on 127.0.0.1 on a
// free port and is disposed of whatever happens. Prints one line per step;
// exits non-zero on the first failure.
import { Miniflare, Log, LogLevel } from 'miniflare';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import assert from 'node:assert/strict';

const [dir] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node tests/cloudflare/worker.mjs <worker build dir>');
  process.exit(2);
}
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/tests/cloudflare.rs sets it)`);
  return v;
};
const moto = {
  endpoint: env('MOTO_ENDPOINT'),
  bucket: env('MOTO_BUCKET'),
  region: env('MOTO_REGION'),
  keyId: env('MOTO_KEY_ID'),
  secret: env('MOTO_SECRET'),
};

// The Worker's console (workerd's stdout and stderr: the lease steps as
// JSON lines) is kept for the assertions, and Miniflare's own log lines.
const logs = [];
class Capture extends Log {
  log(message) { logs.push(message); }
}
function capture(...streams) {
  for (const stream of streams) createInterface({ input: stream }).on('line', (l) => logs.push(l));
}

const open = [];
async function worker(bindings, { r2 = true } = {}) {
  const mf = new Miniflare({
    modules: [
      { type: 'ESModule', path: join(dir, 'index.js'), contents: readFileSync(join(dir, 'index.js')) },
      { type: 'CompiledWasm', path: join(dir, 'index_bg.wasm'), contents: readFileSync(join(dir, 'index_bg.wasm')) },
    ],
    modulesRoot: dir,
    compatibilityDate: '2026-04-01',
    r2Buckets: r2 ? ['LOCKS'] : [],
    bindings,
    host: '127.0.0.1',
    port: 0,
    cf: false,
    log: new Capture(LogLevel.INFO),
    handleRuntimeStdio: capture,
  });
  open.push(mf);
  await mf.ready;
  return mf;
}

async function call(mf, method, path, body) {
  const init = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const res = await mf.dispatchFetch(`http://worker.test${path}`, init);
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch (_) { throw new Error(`${method} ${path}: not JSON (${res.status}): ${text}`); }
  return { status: res.status, json, text };
}

// Five scheduled events for the same tick at once: exactly one job run.
async function fiveTicks(mf, scheduledTime) {
  const w = await mf.getWorker();
  const results = await Promise.all(
    Array.from({ length: 5 }, () => w.scheduled({ cron: '* * * * *', scheduledTime })),
  );
  for (const r of results) assert.equal(r.outcome, 'ok', JSON.stringify(r));
}

// The fenced result: a fence header line, then the job's JSON.
async function result(r2) {
  const [header, payload] = (await (await r2.get('cron/last-run.json')).text()).split('\n');
  const fence = JSON.parse(header);
  const body = JSON.parse(payload);
  assert.equal(fence.fence_token, body.token);
  return body;
}

const lines = (what) => logs.filter((l) => l.includes(`"lease":"${what}"`));

const steps = [];
async function step(name, fn) {
  const started = Date.now();
  await fn();
  steps.push(name);
  console.log(`ok: ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

let failed = false;
try {
  // ---------------------------------------------------------------- R2 binding
  const binding = {
    LEASE_R2_BINDING: 'LOCKS',
    LEASE_KEY: 'locks/cron',
    LEASE_TTL: '30s',
    JOB_MS: '1500',
  };
  const mf = await worker(binding);
  const r2 = await mf.getR2Bucket('LOCKS');

  await step('binding: GET /lease before any run says there is no lease', async () => {
    const r = await call(mf, 'GET', '/lease');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { key: 'locks/cron', exists: false, free: true });
  });

  await step('binding: the probe passes create-if-absent, etag match, stale etag, missing key; refuses mutex', async () => {
    const r = await call(mf, 'GET', '/lease/probe');
    assert.equal(r.status, 200, r.text);
    const passed = Object.fromEntries(r.json.checks.map((c) => [c.check, c.passed]));
    for (const check of ['create_if_absent', 'second_create_refused', 'if_match_current',
      'if_match_stale_refused', 'if_match_missing_refused', 'if_match_missing_not_created', 'list', 'put_returns_etag']) {
      assert.equal(passed[check], true, `${check}: ${r.text}`);
    }
    assert.equal(passed.delete_if_match_current, false, r.text);
    assert.equal(r.json.protocols.cas.safe, true, r.text);
    assert.equal(r.json.protocols.epochs.safe, true, r.text);
    assert.equal(r.json.protocols.mutex.safe, false, r.text);
    assert.equal(r.json.supported, true);
  });

  await step('binding: 5 concurrent scheduled events run the job once; the others skip', async () => {
    const tick = Date.now();
    await fiveTicks(mf, tick);
    const runs = (await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects;
    assert.equal(runs.length, 1, JSON.stringify(runs.map((o) => o.key)));
    assert.equal(lines('acquired').length, 1, logs.join('\n'));
    assert.equal(lines('skipped').length, 4, logs.join('\n'));
    assert.equal((await result(r2)).token, 1);
    const r = await call(mf, 'GET', '/lease');
    assert.equal(r.json.released, true, r.text);
    assert.equal(r.json.token, 1, r.text);
    assert.match(r.json.holder, /^worker\/[0-9a-f]{8}$/, r.text);
    assert.equal(typeof r.json.expires, 'string');
  });

  await step('binding: the next tick runs again with token 2', async () => {
    const tick = Date.now() + 60000;
    await fiveTicks(mf, tick);
    const runs = (await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects;
    assert.equal(runs.length, 1);
    assert.equal((await result(r2)).token, 2);
  });

  await step('binding: acquire by hand, busy for a second caller, stale release refused, release', async () => {
    const a = await call(mf, 'POST', '/lease/acquire');
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.acquired, true);
    assert.equal(a.json.token, 3);
    const b = await call(mf, 'POST', '/lease/acquire');
    assert.equal(b.status, 409, b.text);
    assert.equal(b.json.holder, a.json.holder);
    // A scheduled tick now skips: the manual holder has it.
    const tick = Date.now() + 120000;
    await fiveTicks(mf, tick);
    assert.equal((await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects.length, 0);
    const stale = await call(mf, 'POST', '/lease/release', { etag: 'not-the-etag' });
    assert.equal(stale.status, 409, stale.text);
    assert.match(stale.json.error, /not the version you hold/);
    // Quoted as in an HTTP header: the same etag.
    const ok = await call(mf, 'POST', '/lease/release', { etag: `"${a.json.etag}"` });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { released: true, token: 3 });
    const bad = await call(mf, 'POST', '/lease/release', { nope: 1 });
    assert.equal(bad.status, 400, bad.text);
  });

  // ------------------------------------------------------------- signed fetch
  const signed = {
    LEASE_ENDPOINT: moto.endpoint,
    LEASE_BUCKET: moto.bucket,
    AWS_REGION: moto.region,
    AWS_ACCESS_KEY_ID: moto.keyId,
    AWS_SECRET_ACCESS_KEY: moto.secret,
    LEASE_KEY: 'locks/signed',
    LEASE_TTL: '30s',
    JOB_MS: '1500',
  };
  const s3 = await worker(signed, { r2: false });

  await step('signed fetch: moto (signatures checked) passes the probe for cas', async () => {
    const r = await call(s3, 'GET', '/lease/probe');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.protocols.cas.safe, true, r.text);
  });

  await step('signed fetch: acquire, status, release', async () => {
    const a = await call(s3, 'POST', '/lease/acquire');
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.token, 1);
    const st = await call(s3, 'GET', '/lease');
    assert.equal(st.json.holder, a.json.holder, st.text);
    assert.equal(st.json.released, false, st.text);
    assert.ok(st.json.expires_at_ms > Date.now(), st.text);
    const rel = await call(s3, 'POST', '/lease/release', { etag: a.json.etag });
    assert.deepEqual(rel.json, { released: true, token: 1 });
  });

  await step('signed fetch: 5 concurrent scheduled events run the job once', async () => {
    const before = lines('acquired').length;
    const tick = Date.now() + 180000;
    await fiveTicks(s3, tick);
    assert.equal(lines('acquired').length - before, 1, logs.join('\n'));
    const list = await fetch(`${moto.endpoint}/${moto.bucket}?list-type=2`, { method: 'GET' });
    assert.ok(list.status === 403 || list.status === 500, 'moto refuses unsigned requests');
  });

  await step('signed fetch: a wrong secret is refused by moto and named, the secret is not shown', async () => {
    const wrong = 'wrong-secret-0123456789abcdefghijklmnopqrst';
    const w = await worker({ ...signed, AWS_SECRET_ACCESS_KEY: wrong }, { r2: false });
    const r = await call(w, 'POST', '/lease/acquire');
    assert.equal(r.status, 502, r.text);
    assert.match(r.json.message, /SignatureDoesNotMatch/, r.text);
    assert.ok(!r.text.includes(wrong) && !r.text.includes(moto.secret), r.text);
  });

  await step('settings: a missing secret or var is named, with no secret value in the answer', async () => {
    const noSecret = { ...signed };
    delete noSecret.AWS_SECRET_ACCESS_KEY;
    let w = await worker(noSecret, { r2: false });
    let r = await call(w, 'GET', '/lease');
    assert.equal(r.status, 500, r.text);
    assert.equal(r.json.error, 'settings');
    assert.match(r.json.message, /^AWS_SECRET_ACCESS_KEY is not set/, r.text);
    const noKeyId = { ...signed };
    delete noKeyId.AWS_ACCESS_KEY_ID;
    w = await worker(noKeyId, { r2: false });
    r = await call(w, 'POST', '/lease/acquire');
    assert.equal(r.status, 500, r.text);
    assert.match(r.json.message, /^AWS_ACCESS_KEY_ID is not set/, r.text);
    assert.ok(!r.text.includes(moto.secret), r.text);
    w = await worker({ LEASE_R2_BINDING: 'NOPE', LEASE_KEY: 'k' });
    r = await call(w, 'GET', '/lease');
    assert.equal(r.status, 500, r.text);
    assert.match(r.json.message, /LEASE_R2_BINDING is invalid: there is no R2 bucket binding named `NOPE`/, r.text);
    w = await worker({ LEASE_R2_BINDING: 'LOCKS' });
    r = await call(w, 'GET', '/lease');
    assert.match(r.json.message, /^LEASE_KEY is not set/, r.text);
    const secretsInLogs = logs.filter((l) => l.includes(moto.secret));
    assert.deepEqual(secretsInLogs, []);
  });
} catch (e) {
  failed = true;
  console.error(`FAILED after ${steps.length} steps: ${e.stack || e}`);
  console.error(`worker logs:\n${logs.slice(-40).join('\n')}`);
} finally {
  for (const mf of open) await mf.dispose().catch(() => {});
}
console.log(`${steps.length} steps passed${failed ? ', then a failure' : ''}`);
process.exit(failed ? 1 : 0);
