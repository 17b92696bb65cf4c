// One Cron Trigger delivery to the example Worker in workerd, by signed
// fetch to moto, for the cross-platform tick test (tests/tests/lambda.rs,
// `a_slot_named_alike_runs_once_whether_lambda_or_worker_delivers_it`):
//
//   node tests/cloudflare/slot.mjs <worker build dir>
//
// moto's address and keys come in MOTO_ENDPOINT, MOTO_BUCKET, MOTO_REGION,
// MOTO_KEY_ID and MOTO_SECRET (tests/tests/support starts moto), the
// delivery in SLOT_KEY (the lease key), SLOT_TICK (the Worker's
// LEASE_TICK), SLOT_CRON (the trigger) and SLOT_TIME (scheduledTime, ms).
// Prints the Worker's lease log lines (JSON) after the delivery, one per
// line, and exits non-zero if the delivery failed.
import { workerd } from './workerd.mjs';
import { setTimeout as sleep } from 'node:timers/promises';

const [dir] = process.argv.slice(2);
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/tests/lambda.rs sets it)`);
  return v;
};
const logs = [];
const { worker, dispose } = workerd(dir, logs);
let code = 0;
try {
  const mf = await worker(
    {
      LEASE_ENDPOINT: env('MOTO_ENDPOINT'),
      LEASE_BUCKET: env('MOTO_BUCKET'),
      AWS_REGION: env('MOTO_REGION'),
      AWS_ACCESS_KEY_ID: env('MOTO_KEY_ID'),
      AWS_SECRET_ACCESS_KEY: env('MOTO_SECRET'),
      LEASE_KEY: env('SLOT_KEY'),
      LEASE_TICK: env('SLOT_TICK'),
      LEASE_TTL: '30s',
    },
    { r2: false },
  );
  const w = await mf.getWorker();
  const r = await w.scheduled({ cron: env('SLOT_CRON'), scheduledTime: Number(env('SLOT_TIME')) });
  if (r.outcome !== 'ok') throw new Error(`the delivery failed: ${JSON.stringify(r)}`);
  // workerd's output reaches this process a moment after the call returned.
  const ended = (l) => /"lease":"(finished|already-ran|skipped|failed)"/.test(l);
  for (let i = 0; i < 100 && !logs.some(ended); i++) await sleep(50);
  for (const l of logs.filter((l) => l.includes('"lease":'))) console.log(l.slice(l.indexOf('{')));
} catch (e) {
  console.error(e);
  code = 1;
} finally {
  await dispose();
}
process.exit(code);
