// The store conformance lifecycle inside workerd (Miniflare's Node API):
// the conformance Worker (tests/cloudflare/conformance-worker) runs it on its
// R2 binding and, by signed fetch, on moto.
//
//   node tests/cloudflare/conformance.mjs <conformance Worker build dir>
//
// Run by tests/tests/conformance.rs, which starts moto (127.0.0.1, a free
// port, stopped by its PID) and passes it in MOTO_ENDPOINT, MOTO_BUCKET,
// MOTO_REGION, MOTO_KEY_ID, MOTO_SECRET. workerd listens on 127.0.0.1 on a
// free port and is disposed of whatever happens (also on SIGTERM).
//
// Prints one JSON line per run, {"run": {...the Worker's verdict...}},
// which the Rust test judges, and exits non-zero if a check made here
// fails: the route's authentication, and what the R2 bucket holds after
// the runs, read through Miniflare's own R2 API rather than the Worker's
// store.
import { workerd } from './workerd.mjs';
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';

const [dir] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node tests/cloudflare/conformance.mjs <conformance Worker build dir>');
  process.exit(2);
}
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/tests/conformance.rs sets it)`);
  return v;
};

const logs = [];
const { worker, dispose } = workerd(dir, logs);

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const admin = `Bearer ${ADMIN_TOKEN}`;

async function conformance(mf, body, authorization) {
  const headers = { 'content-type': 'application/json' };
  if (authorization !== undefined) headers.authorization = authorization;
  const res = await mf.dispatchFetch('http://worker.test/conformance', {
    method: 'POST', headers, body: JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch (_) { throw new Error(`not JSON (${res.status}): ${text}`); }
  return { status: res.status, json, text };
}

// One lifecycle run in the Worker: its verdict, printed for the Rust test.
async function run(mf, protocol, expect) {
  const started = Date.now();
  const r = await conformance(mf, { protocol, expect }, admin);
  assert.equal(r.status, 200, r.text);
  console.log(JSON.stringify({ run: { ...r.json, expect, seconds: (Date.now() - started) / 1000 } }));
}

// The lease record at `key`, read with Miniflare's R2 API.
async function record(bucket, key) {
  const object = await bucket.get(key);
  return object && JSON.parse(await object.text());
}

let failed = false;
try {
  // ------------------------------------------------------------- the route
  const binding = { LEASE_R2_BINDING: 'LOCKS' };
  const disabled = await worker(binding);
  for (const authorization of [undefined, admin]) {
    const r = await conformance(disabled, { protocol: 'cas', expect: 'supported' }, authorization);
    assert.equal(r.status, 403, r.text);
  }
  const mf = await worker({ ...binding, LEASE_ADMIN_TOKEN: ADMIN_TOKEN });
  for (const authorization of [undefined, `Bearer ${ADMIN_TOKEN}x`, 'Basic x']) {
    const r = await conformance(mf, { protocol: 'cas', expect: 'supported' }, authorization);
    assert.equal(r.status, 401, r.text);
  }
  const bucket = await mf.getR2Bucket('LOCKS');
  assert.deepEqual((await bucket.list()).objects, [], 'a refused call wrote nothing');
  console.log('auth: without the secret 403, without the token 401, nothing written');

  // ------------------------------------------------------------ R2 binding
  await run(mf, 'cas', 'supported');
  await run(mf, 'epochs', 'supported');
  // No conditional DELETE on the binding: the probe must refuse the mutex.
  await run(mf, 'mutex', 'refused');

  // What the bucket holds, read past the Worker's store: the last holder
  // of each run (e, after the expiry step) released its lease; the refused
  // mutex wrote nothing; the probes left no scratch objects.
  const cas = await record(bucket, 'conformance/cas');
  assert.equal(cas.holder, 'e', JSON.stringify(cas));
  assert.equal(cas.released, true, JSON.stringify(cas));
  // The session steps' objects (cas): a's session closed (its record
  // released), and the keys it owned taken last by b, as leases of their
  // own, and given back.
  const session = await record(bucket, 'conformance/cas.session');
  assert.equal(session.holder, 'a', JSON.stringify(session));
  assert.equal(session.released, true, JSON.stringify(session));
  // (owned-3: handed over by a's session to b, which took it at once.)
  for (const key of ['conformance/cas.owned-1', 'conformance/cas.owned-2', 'conformance/cas.owned-3']) {
    const owned = await record(bucket, key);
    assert.equal(owned.holder, 'b', `${key}: ${JSON.stringify(owned)}`);
    assert.equal(owned.released, true, `${key}: ${JSON.stringify(owned)}`);
    assert.equal(owned.owned_by ?? null, null, `${key}: ${JSON.stringify(owned)}`);
  }
  // The pool step's seats (cas): each held last by a run of a, b or c,
  // released when its job ended; a seat's object is never deleted.
  for (const key of ['conformance/cas.pool/seat-0', 'conformance/cas.pool/seat-1']) {
    const seat = await record(bucket, key);
    assert.ok(['a', 'b', 'c'].includes(seat.holder), `${key}: ${JSON.stringify(seat)}`);
    assert.equal(seat.released, true, `${key}: ${JSON.stringify(seat)}`);
  }
  const epochs = (await bucket.list({ prefix: 'conformance/epochs/' })).objects.map((o) => o.key).sort();
  assert.ok(epochs.length > 0, 'no epoch objects');
  const newest = await record(bucket, epochs[epochs.length - 1]);
  assert.equal(newest.released, true, JSON.stringify(newest));
  const keys = (await bucket.list({ prefix: 'conformance/' })).objects.map((o) => o.key);
  // The probe's verdict is kept for the fleet (docs/protocols.md, "The
  // shared verdict"): the mutex's refuses the mutex, naming the check.
  const verdicts = keys.filter((k) => k.endsWith('.probe/verdict.json'));
  const others = keys.filter((k) => !k.endsWith('.probe/verdict.json'));
  assert.deepEqual(others.filter((k) => k.startsWith('conformance/mutex')), [], JSON.stringify(keys));
  assert.deepEqual(others.filter((k) => k.includes('.probe/')), [], JSON.stringify(keys));
  const mutexVerdict = await record(bucket, 'conformance/mutex.probe/verdict.json');
  assert.equal(mutexVerdict.state, 'passed', JSON.stringify(mutexVerdict));
  assert.ok(!mutexVerdict.safe.includes('mutex'), JSON.stringify(mutexVerdict));
  assert.ok(mutexVerdict.refused.some((r) => r.protocol === 'mutex' && r.check.startsWith('delete_if_match')), JSON.stringify(mutexVerdict));
  console.log(`r2: the bucket holds ${keys.length} objects: cas released by e, the session closed and its keys given back by b, the newest epoch released, no mutex lock, no probe scratch, ${verdicts.length} kept verdicts`);

  // --------------------------------------------------------- signed fetch
  const signed = await worker({
    LEASE_ENDPOINT: env('MOTO_ENDPOINT'),
    LEASE_BUCKET: env('MOTO_BUCKET'),
    AWS_REGION: env('MOTO_REGION'),
    AWS_ACCESS_KEY_ID: env('MOTO_KEY_ID'),
    AWS_SECRET_ACCESS_KEY: env('MOTO_SECRET'),
    LEASE_ADMIN_TOKEN: ADMIN_TOKEN,
  }, { r2: false });
  for (const protocol of ['cas', 'epochs', 'mutex']) await run(signed, protocol, 'supported');
} catch (e) {
  failed = true;
  console.error(`FAILED: ${e.stack || e}`);
  console.error(`worker logs:\n${logs.slice(-40).join('\n')}`);
} finally {
  await dispose();
}
process.exit(failed ? 1 : 0);
