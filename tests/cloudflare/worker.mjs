// The example Worker in workerd (Miniflare's Node API), against its R2
// binding and, by signed fetch, against moto with signature checking on.
//
//   node tests/cloudflare/worker.mjs <worker build dir>
//
// Run by tests/tests/cloudflare.rs, which starts moto (127.0.0.1, a free
// port, stopped by its PID) and passes it in MOTO_ENDPOINT, MOTO_BUCKET,
// MOTO_REGION, MOTO_KEY_ID, MOTO_SECRET. workerd listens on 127.0.0.1 on a
// free port and is disposed of whatever happens (also on SIGTERM). Prints one line per step;
// exits non-zero on the first failure.
//
// The routes that change the lease or write to the bucket need
// `Authorization: Bearer <LEASE_ADMIN_TOKEN>`: every Worker here that
// calls them has a random admin token, and the auth steps check each route
// without the secret configured, with wrong credentials and with the right
// ones.
import { workerd } from './workerd.mjs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
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
const { worker, dispose } = workerd(dir, logs);

// The admin secret of the Workers below, and its Authorization header.
const ADMIN_TOKEN = randomBytes(32).toString('hex');
const admin = `Bearer ${ADMIN_TOKEN}`;

// `authorization`: the Authorization header's value, if any.
async function call(mf, method, path, body, authorization) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  if (authorization !== undefined) init.headers.authorization = authorization;
  const res = await mf.dispatchFetch(`http://worker.test${path}`, init);
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch (_) { throw new Error(`${method} ${path}: not JSON (${res.status}): ${text}`); }
  return { status: res.status, json, text, headers: res.headers };
}

// The routes that change the lease or write to the bucket.
const guarded = [
  ['GET', '/lease/probe'],
  ['POST', '/lease/acquire'],
  ['POST', '/lease/release', { etag: 'any' }],
  ['POST', '/upstream'],
];

// The public view of GET /lease: free, or held until when; nothing to act with.
function assertPublic(r, { free }) {
  assert.equal(r.status, 200, r.text);
  if (free) {
    assert.deepEqual(r.json, { free: true });
  } else {
    assert.deepEqual(Object.keys(r.json).sort(), ['expires', 'expires_at_ms', 'free'], r.text);
    assert.equal(r.json.free, false, r.text);
    assert.ok(r.json.expires_at_ms > Date.now(), r.text);
  }
}

// A cron run started in the background, once it holds the lease: its
// promise and the stored lease object (etag and record).
async function cronHolding(mf, key) {
  const bucket = await mf.getR2Bucket('LOCKS');
  const run = (await mf.getWorker()).scheduled({ cron: '* * * * *', scheduledTime: Date.now() });
  for (let i = 0; i < 400; i++) {
    const object = await bucket.get(key);
    if (object) return { run, etag: object.etag, record: JSON.parse(await object.text()) };
    await sleep(25);
  }
  throw new Error(`the cron run never wrote ${key}`);
}

// The lease object is still the very version the cron run wrote: same
// etag, same holder and token, not released.
async function stillHeld(mf, key, held) {
  const object = await (await mf.getR2Bucket('LOCKS')).get(key);
  assert.ok(object, `${key} is gone`);
  const record = JSON.parse(await object.text());
  assert.equal(object.etag, held.etag, JSON.stringify(record));
  assert.equal(record.holder, held.record.holder);
  assert.equal(record.token, held.record.token);
  assert.ok(!record.released, JSON.stringify(record));
}

// The cron run ends on its own: it ran the job and released the lease
// itself, nothing having taken or released it meanwhile.
async function finishedUndisturbed(held) {
  const result = await held.run;
  assert.equal(result.outcome, 'ok', JSON.stringify(result));
  const mine = (what) => lines(what).filter((l) => l.includes(`"holder":"${held.record.holder}"`));
  assert.equal(mine('finished').length, 1, logs.join('\n'));
  assert.deepEqual([...mine('lost'), ...mine('release-failed'), ...mine('failed')], []);
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

// The log lines of `what` after the first `from`, once there are `count`
// of them: workerd's output reaches this process a moment after the call
// that wrote it has returned.
async function linesAfter(what, from, count) {
  for (let i = 0; i < 100 && lines(what).length - from < count; i++) await sleep(50);
  return lines(what).slice(from);
}

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
  const noAdmin = {
    LEASE_R2_BINDING: 'LOCKS',
    LEASE_KEY: 'locks/cron',
    LEASE_TTL: '30s',
    JOB_MS: '1500',
  };
  const binding = { ...noAdmin, LEASE_ADMIN_TOKEN: ADMIN_TOKEN };

  // ---------------------------------------------------------------- auth
  await step('auth, no LEASE_ADMIN_TOKEN: probe, acquire, release answer 403 (how to enable) and write nothing', async () => {
    const w = await worker(noAdmin);
    for (const [method, path, body] of guarded) {
      for (const authorization of [undefined, admin, 'Bearer x', 'Basic x']) {
        const r = await call(w, method, path, body, authorization);
        assert.equal(r.status, 403, `${method} ${path} ${authorization}: ${r.text}`);
        assert.equal(r.json.error, 'disabled', r.text);
        assert.match(r.json.message, /LEASE_ADMIN_TOKEN is not set.*wrangler secret put LEASE_ADMIN_TOKEN/, r.text);
      }
    }
    assertPublic(await call(w, 'GET', '/lease'), { free: true });
    // Credentials with no secret to check them against: refused, not ignored.
    assert.equal((await call(w, 'GET', '/lease', undefined, admin)).status, 403);
    // No probe scratch object, no lease: nothing reached the bucket.
    assert.deepEqual((await (await w.getR2Bucket('LOCKS')).list()).objects, []);
    // A secret too short to resist guessing disables the routes as well.
    const weak = await worker({ ...noAdmin, LEASE_ADMIN_TOKEN: 'letmein' });
    const r = await call(weak, 'POST', '/lease/acquire', undefined, 'Bearer letmein');
    assert.equal(r.status, 403, r.text);
    assert.match(r.json.message, /LEASE_ADMIN_TOKEN is set but unusable: it is too short/, r.text);
    assert.ok(!r.text.includes('letmein'), r.text);
  });

  await step('auth, no LEASE_ADMIN_TOKEN: a live cron lease cannot be released or taken; it stays held', async () => {
    const w = await worker({ ...noAdmin, JOB_MS: '4000' });
    const held = await cronHolding(w, 'locks/cron');
    const status = await call(w, 'GET', '/lease');
    assertPublic(status, { free: false });
    assert.ok(!status.text.includes(held.etag) && !status.text.includes(held.record.holder), status.text);
    for (const authorization of [undefined, admin]) {
      for (const etag of [held.etag, `"${held.etag}"`]) {
        const r = await call(w, 'POST', '/lease/release', { etag }, authorization);
        assert.equal(r.status, 403, r.text);
      }
      assert.equal((await call(w, 'POST', '/lease/acquire', undefined, authorization)).status, 403);
    }
    await stillHeld(w, 'locks/cron', held);
    await finishedUndisturbed(held);
  });

  const mf = await worker(binding);
  const r2 = await mf.getR2Bucket('LOCKS');
  // Wrong in every way: absent, wrong, cut short, empty, another scheme, two tokens.
  const wrongAuth = [undefined, `Bearer ${ADMIN_TOKEN}x`, `Bearer ${ADMIN_TOKEN.slice(0, -1)}`,
    `Bearer ${ADMIN_TOKEN.toUpperCase()}`, 'Bearer', 'Bearer   ', `Basic ${ADMIN_TOKEN}`,
    ADMIN_TOKEN, `Bearer ${ADMIN_TOKEN} ${ADMIN_TOKEN}`];

  await step('auth, LEASE_ADMIN_TOKEN set: missing, wrong or malformed credentials get 401 with WWW-Authenticate: Bearer and write nothing', async () => {
    for (const [method, path, body] of guarded) {
      for (const authorization of wrongAuth) {
        const r = await call(mf, method, path, body, authorization);
        assert.equal(r.status, 401, `${method} ${path} ${authorization}: ${r.text}`);
        assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer realm="lease"/, `${method} ${path} ${authorization}`);
        assert.equal(r.json.error, 'unauthorized', r.text);
        assert.ok(!r.text.includes(ADMIN_TOKEN), r.text);
      }
    }
    for (const authorization of wrongAuth.slice(1)) {
      const r = await call(mf, 'GET', '/lease', undefined, authorization);
      assert.equal(r.status, 401, `GET /lease ${authorization}: ${r.text}`);
    }
    assertPublic(await call(mf, 'GET', '/lease'), { free: true });
    assert.deepEqual((await r2.list()).objects, []);
  });

  await step('auth, LEASE_ADMIN_TOKEN set: a live cron lease cannot be released or taken without it; it stays held', async () => {
    const w = await worker({ ...binding, JOB_MS: '4000' });
    const held = await cronHolding(w, 'locks/cron');
    const status = await call(w, 'GET', '/lease');
    assertPublic(status, { free: false });
    assert.ok(!status.text.includes(held.etag) && !status.text.includes(held.record.holder), status.text);
    const full = await call(w, 'GET', '/lease', undefined, admin);
    assert.equal(full.status, 200, full.text);
    assert.equal(full.json.etag, held.etag, full.text);
    assert.equal(full.json.holder, held.record.holder, full.text);
    for (const authorization of wrongAuth) {
      const r = await call(w, 'POST', '/lease/release', { etag: held.etag }, authorization);
      assert.equal(r.status, 401, `${authorization}: ${r.text}`);
      assert.equal((await call(w, 'POST', '/lease/acquire', undefined, authorization)).status, 401);
    }
    await stillHeld(w, 'locks/cron', held);
    await finishedUndisturbed(held);
  });

  await step('binding: GET /lease before any run says there is no lease', async () => {
    const r = await call(mf, 'GET', '/lease', undefined, admin);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { key: 'locks/cron', exists: false, free: true });
  });

  await step('binding: the probe passes create-if-absent, etag match, stale etag, missing key; refuses mutex', async () => {
    // The scheme in any case, with extra spaces: still the admin.
    const r = await call(mf, 'GET', '/lease/probe', undefined, `  bearer   ${ADMIN_TOKEN} `);
    assert.equal(r.status, 200, r.text);
    const passed = Object.fromEntries(r.json.checks.map((c) => [c.check, c.passed]));
    for (const check of ['create_if_absent', 'second_create_refused', 'if_match_current',
      'if_match_stale_refused', 'if_match_missing_refused', 'if_match_missing_not_created', 'list_after_write', 'list_pages', 'put_returns_etag']) {
      assert.equal(passed[check], true, `${check}: ${r.text}`);
    }
    assert.equal(passed.delete_if_match_current, false, r.text);
    assert.equal(r.json.protocols.cas.safe, true, r.text);
    assert.equal(r.json.protocols.epochs.safe, true, r.text);
    assert.equal(r.json.protocols.mutex.safe, false, r.text);
    assert.equal(r.json.supported, true);
  });

  await step('binding: 5 concurrent scheduled events run the job once; the others skip', async () => {
    const [acquired, skipped] = [lines('acquired').length, lines('skipped').length];
    const tick = Date.now();
    await fiveTicks(mf, tick);
    const runs = (await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects;
    assert.equal(runs.length, 1, JSON.stringify(runs.map((o) => o.key)));
    assert.equal(lines('acquired').length - acquired, 1, logs.join('\n'));
    assert.equal(lines('skipped').length - skipped, 4, logs.join('\n'));
    assert.equal((await result(r2)).token, 1);
    const r = await call(mf, 'GET', '/lease', undefined, admin);
    assert.equal(r.json.released, true, r.text);
    assert.equal(r.json.token, 1, r.text);
    assert.match(r.json.holder, /^worker\/[0-9a-f]{8}$/, r.text);
    assert.equal(typeof r.json.expires, 'string');
  });

  await step('binding: the same tick delivered again after it ran is answered from the record; the job does not run', async () => {
    const [acquired, already] = [lines('acquired').length, lines('already-ran').length];
    const tick = Date.now() + 30000;
    const w = await mf.getWorker();
    const ran = await w.scheduled({ cron: '* * * * *', scheduledTime: tick });
    assert.deepEqual(ran, { outcome: 'ok', noRetry: false }, 'a tick that ran may be retried');
    const first = (await result(r2)).token;
    for (let i = 0; i < 3; i++) {
      const r = await w.scheduled({ cron: '* * * * *', scheduledTime: tick });
      // Answered from the record: the platform is told not to retry it.
      assert.deepEqual(r, { outcome: 'ok', noRetry: true }, JSON.stringify(r));
    }
    const answered = await linesAfter('already-ran', already, 3);
    assert.equal(answered.length, 3, logs.join('\n'));
    assert.equal(lines('acquired').length - acquired, 1, logs.join('\n'));
    for (const l of answered) {
      const line = JSON.parse(l);
      assert.equal(line.tick, `cron:* * * * *@${tick}`, l);
      assert.equal(line.token, first, l);
    }
    const runs = (await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects;
    assert.equal(runs.length, 1, JSON.stringify(runs.map((o) => o.key)));
    assert.equal((await result(r2)).token, first, 'the result was not rewritten');
    // Another cron expression at the same time is another tick.
    await w.scheduled({ cron: '*/5 * * * *', scheduledTime: tick });
    assert.equal((await linesAfter('acquired', acquired, 2)).length, 2, logs.join('\n'));
  });

  await step('binding: a run names the ticks of its cron that never ran', async () => {
    const w = await mf.getWorker();
    // Whole minutes a day ahead, after every tick the other steps use.
    const base = (Math.floor(Date.now() / 60000) + 24 * 60) * 60000;
    const finished = lines('finished').length;
    for (const minute of [0, 1, 5]) {
      const r = await w.scheduled({ cron: '* * * * *', scheduledTime: base + minute * 60000 });
      assert.equal(r.outcome, 'ok', JSON.stringify(r));
    }
    const done = (await linesAfter('finished', finished, 3)).map((l) => JSON.parse(l));
    assert.equal(done.length, 3, logs.join('\n'));
    assert.equal(done[1].missed, null, 'the next minute: none missed');
    // Minutes 2, 3 and 4 never ran, counted from minute 1.
    assert.equal(done[2].missed, 3, JSON.stringify(done[2]));
    assert.equal(done[2].missed_since_ms, base + 60000, JSON.stringify(done[2]));
  });

  await step('binding: the next tick runs again', async () => {
    const tick = Date.now() + 60000;
    const before = (await result(r2)).token;
    await fiveTicks(mf, tick);
    const runs = (await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects;
    assert.equal(runs.length, 1);
    assert.equal((await result(r2)).token, before + 1);
  });

  await step('binding: acquire by hand, busy for a second caller, stale release refused, release', async () => {
    const a = await call(mf, 'POST', '/lease/acquire', undefined, admin);
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.acquired, true);
    assert.equal(a.json.token, 8);
    const b = await call(mf, 'POST', '/lease/acquire', undefined, admin);
    assert.equal(b.status, 409, b.text);
    assert.equal(b.json.holder, a.json.holder);
    // A scheduled tick now skips: the manual holder has it.
    const tick = Date.now() + 120000;
    await fiveTicks(mf, tick);
    assert.equal((await r2.list({ prefix: `cron/last-run.json.runs/${tick}/` })).objects.length, 0);
    const stale = await call(mf, 'POST', '/lease/release', { etag: 'not-the-etag' }, admin);
    assert.equal(stale.status, 409, stale.text);
    assert.match(stale.json.error, /not the version you hold/);
    // Quoted as in an HTTP header: the same etag.
    const ok = await call(mf, 'POST', '/lease/release', { etag: `"${a.json.etag}"` }, admin);
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { released: true, token: 8 });
    const bad = await call(mf, 'POST', '/lease/release', { nope: 1 }, admin);
    assert.equal(bad.status, 400, bad.text);
  });

  await step('binding: a pool of 2 seats: of 6 concurrent upstream calls at most 2 run at once, the rest 429; a later call runs', async () => {
    const pool = await worker({ ...binding, POOL_KEY: 'pools/upstream', POOL_SEATS: '2', JOB_MS: '1500' });
    const r2p = await pool.getR2Bucket('LOCKS');
    const replies = await Promise.all(
      Array.from({ length: 6 }, () => call(pool, 'POST', '/upstream', undefined, admin)),
    );
    const ran = replies.filter((r) => r.status === 200);
    const busy = replies.filter((r) => r.status === 429);
    assert.equal(ran.length + busy.length, 6, replies.map((r) => r.text).join('\n'));
    assert.ok(ran.length >= 1 && ran.length <= 2, replies.map((r) => r.text).join('\n'));
    assert.ok(busy.length >= 4, replies.map((r) => r.text).join('\n'));
    for (const r of busy) {
      assert.deepEqual(r.json, { busy: true, seats: 2 }, r.text);
      assert.ok(Number(r.headers.get('retry-after')) >= 1, r.text);
    }
    for (const r of ran) assert.ok(r.json.seat === 0 || r.json.seat === 1, r.text);
    if (ran.length === 2) assert.notEqual(ran[0].json.seat, ran[1].json.seat);
    // Once they are done a call runs, in a seat given back.
    const later = await call(pool, 'POST', '/upstream', undefined, admin);
    assert.equal(later.status, 200, later.text);
    // The calls as recorded: never more than 2 at once.
    const calls = [];
    for (const o of (await r2p.list({ prefix: 'pools/upstream.calls/' })).objects) {
      calls.push(JSON.parse(await (await r2p.get(o.key)).text()));
    }
    assert.equal(calls.length, ran.length + 1, JSON.stringify(calls));
    for (const c of calls) {
      const during = calls.filter((d) => d.started_ms < c.ended_ms && c.started_ms < d.ended_ms);
      assert.ok(during.length <= 2, JSON.stringify(calls));
    }
    // The seats are leases of their own, given back, never deleted.
    for (const seat of [0, 1]) {
      const taken = ran.some((r) => r.json.seat === seat) || later.json.seat === seat;
      const object = await r2p.get(`pools/upstream/seat-${seat}`);
      if (taken) assert.ok(object && JSON.parse(await object.text()).released, `seat ${seat}`);
    }
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
    LEASE_ADMIN_TOKEN: ADMIN_TOKEN,
  };
  const s3 = await worker(signed, { r2: false });

  await step('signed fetch: moto (signatures checked) passes the probe for cas', async () => {
    const r = await call(s3, 'GET', '/lease/probe', undefined, admin);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.protocols.cas.safe, true, r.text);
  });

  await step('signed fetch: acquire, status, release', async () => {
    const a = await call(s3, 'POST', '/lease/acquire', undefined, admin);
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.token, 1);
    assertPublic(await call(s3, 'GET', '/lease'), { free: false });
    const st = await call(s3, 'GET', '/lease', undefined, admin);
    assert.equal(st.json.holder, a.json.holder, st.text);
    assert.equal(st.json.etag, a.json.etag, st.text);
    assert.equal(st.json.released, false, st.text);
    assert.ok(st.json.expires_at_ms > Date.now(), st.text);
    assert.equal((await call(s3, 'POST', '/lease/release', { etag: a.json.etag })).status, 401);
    const rel = await call(s3, 'POST', '/lease/release', { etag: a.json.etag }, admin);
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
    const r = await call(w, 'POST', '/lease/acquire', undefined, admin);
    assert.equal(r.status, 502, r.text);
    assert.match(r.json.message, /SignatureDoesNotMatch/, r.text);
    assert.ok(!r.text.includes(wrong) && !r.text.includes(moto.secret), r.text);
  });

  await step('settings: a missing secret or var is named, with no secret value in the answer; Azure without the feature is named', async () => {
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
    r = await call(w, 'POST', '/lease/acquire', undefined, admin);
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
    // The example Worker is built without lease-cloudflare's `azure`
    // feature: Azure is refused, and the error names the feature.
    w = await worker({ ...signed, LEASE_PROVIDER: 'azure', AZURE_STORAGE_ACCOUNT: 'acct', AZURE_STORAGE_KEY: 'a2V5' }, { r2: false });
    r = await call(w, 'GET', '/lease');
    assert.equal(r.status, 500, r.text);
    assert.match(r.json.message, /^LEASE_PROVIDER is invalid: `azure`: this build has no Azure Blob dialect .*lease-cloudflare's feature `azure`/, r.text);
    assert.ok(!r.text.includes('a2V5'), r.text);
    const secretsInLogs = logs.filter((l) => l.includes(moto.secret) || l.includes(ADMIN_TOKEN));
    assert.deepEqual(secretsInLogs, []);
  });

  await step('wrangler.toml: no workers.dev address, preview URLs or routes; the admin token is no var', async () => {
    const { unstable_readConfig } = await import('wrangler');
    const here = dirname(fileURLToPath(import.meta.url));
    const config = unstable_readConfig({ config: join(here, '../../cloudflare/example/wrangler.toml') });
    assert.equal(config.workers_dev, false);
    assert.equal(config.preview_urls, false);
    assert.deepEqual(config.routes ?? [], []);
    assert.equal(config.route, undefined);
    assert.ok(!('LEASE_ADMIN_TOKEN' in (config.vars ?? {})), JSON.stringify(config.vars));
    assert.deepEqual(config.triggers.crons, ['* * * * *']);
  });
} catch (e) {
  failed = true;
  console.error(`FAILED after ${steps.length} steps: ${e.stack || e}`);
  console.error(`worker logs:\n${logs.slice(-40).join('\n')}`);
} finally {
  await dispose();
}
console.log(`${steps.length} steps passed${failed ? ', then a failure' : ''}`);
process.exit(failed ? 1 : 0);
