// Workers in workerd for the test scripts (Miniflare's Node API): each one
// listens on 127.0.0.1 on a free port, keeps its console (workerd's stdout
// and stderr) and Miniflare's own log lines in `logs`, and is disposed of by
// `dispose`, also on SIGTERM and SIGINT (tests/tests/support stops a script
// by its PID on a timeout: workerd goes first).
import { Miniflare, Log, LogLevel } from 'miniflare';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

// `dir`: a worker-build output (index.js, index_bg.wasm); `logs`: the array
// the log lines go to. Returns `worker(bindings, { r2 })`, which starts one
// (with an R2 bucket bound as LOCKS unless `r2` is false), and `dispose`.
export function workerd(dir, logs) {
  class Capture extends Log {
    log(message) { logs.push(message); }
  }
  const capture = (...streams) => {
    for (const stream of streams) createInterface({ input: stream }).on('line', (l) => logs.push(l));
  };
  const open = [];
  // Miniflare keeps each instance's storage in a directory under the
  // temporary directory and removes it in the background on dispose, which
  // the script's exit cuts short: one directory of our own for all of
  // them, removed here before the script ends.
  const scratch = mkdtempSync(join(tmpdir(), 'lease-workerd-'));
  process.env.TMPDIR = scratch;
  const dispose = async () => {
    for (const mf of open.splice(0)) await mf.dispose().catch(() => {});
    rmSync(scratch, { recursive: true, force: true });
  };
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => dispose().finally(() => process.exit(1)));
  }
  const file = (name) => join(dir, name);
  async function worker(bindings, { r2 = true } = {}) {
    const mf = new Miniflare({
      modules: [
        { type: 'ESModule', path: file('index.js'), contents: readFileSync(file('index.js')) },
        { type: 'CompiledWasm', path: file('index_bg.wasm'), contents: readFileSync(file('index_bg.wasm')) },
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
  return { worker, dispose };
}
