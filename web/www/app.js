// The demo page: drives lease-web's Demo (the simulator in WebAssembly)
// on animation frames and draws what it reports. No logic of the protocol
// lives here: the page only asks the world for JSON and renders it.
import init, { Demo } from './pkg/lease_web.js';
import { SCENARIOS, scenario } from './scenarios.js';

const $ = (id) => document.getElementById(id);
const MAX_LIST = 300;

let demo = null;
let entries = [];       // timeline entries fetched so far
let running = true;
let lastFrame = null;
let selected = null;    // timeline index of the request shown
let lastNodes = '';
let actions = [];       // what was done to this world, with when: the link replays it
let story = null;       // the scenario shown, if any
let built = null;       // the settings the world shown was built with

function showError(e) {
  const box = $('error');
  box.textContent = String(e);
  box.hidden = false;
}

function clearError() {
  $('error').hidden = true;
}

// The world's settings as the form shows them.
function settings() {
  return {
    protocol: $('protocol').value,
    naive: $('naive').checked,
    nodes: Number($('node-count').value),
    ttl: Number($('ttl').value),
    seed: Number($('seed').value),
  };
}

function setSettings(w) {
  $('protocol').value = w.protocol;
  $('naive').checked = !!w.naive;
  $('node-count').value = w.nodes;
  $('ttl').value = w.ttl;
  $('seed').value = w.seed;
}

function build(w) {
  return new Demo(w.nodes, Math.round(w.ttl * 1000), w.protocol, !!w.naive, w.seed);
}

function reset() {
  clearError();
  let next;
  const w = settings();
  try {
    next = build(w);
  } catch (e) {
    showError(e);
    return;
  }
  if (demo) demo.free();
  demo = next;
  built = w;
  entries = [];
  actions = [];
  selected = null;
  lastNodes = '';
  showStory(null);
  $('requests').replaceChildren();
  $('log').replaceChildren();
  $('request-detail').textContent = 'Each store call appears here as the exact HTTP request the core renders for S3.';
  refresh();
  updateLink();
}

function setRunning(on) {
  running = on;
  $('run').textContent = running ? 'Pause' : 'Run';
  $('run').setAttribute('aria-pressed', String(running));
}

// Does one recorded action to world `d` (after running it to the action's
// time): a fault, a new node, or one single step.
function perform(d, a) {
  const now = d.now_ms();
  if (a.t > now) d.advance(a.t - now);
  if (a.kind === 'add') d.add_node();
  else if (a.kind === 'step') d.step();
  else d.fault(a.kind, a.node, a.ms);
}

// Records and does an action on the world shown.
function record(kind, node = 0, ms = 0) {
  const a = { t: demo.now_ms(), kind, node, ms };
  perform(demo, a);
  actions.push(a);
  updateLink();
}

function leaderOf(state) {
  const i = state.nodes.findIndex((n) => n.holding);
  return i < 0 ? null : i;
}

// Runs a scenario's script on world `d`; returns the actions it did.
function script(d, sc) {
  const done = [];
  for (const s of sc.steps) {
    if (s.at === 'leader') {
      for (let k = 0; k < 1200 && leaderOf(JSON.parse(d.state())) === null; k++) d.advance(50);
    } else if (s.at > d.now_ms()) {
      d.advance(s.at - d.now_ms());
    }
    const state = JSON.parse(d.state());
    const l = leaderOf(state) ?? 0;
    const node = s.node === 'leader' ? l : s.node === 'next' ? (l + 1) % state.nodes.length : (s.node ?? 0);
    const a = { t: d.now_ms(), kind: s.fault, node, ms: s.ms ?? 0 };
    perform(d, a);
    done.push(a);
  }
  if (sc.until > d.now_ms()) d.advance(sc.until - d.now_ms());
  return done;
}

function runScenario(id) {
  const sc = scenario(id);
  if (!sc) { showError(`unknown scenario ${JSON.stringify(id)}`); return; }
  if (sc.jobs) { runJobsScenario(sc); return; }
  setSettings({ naive: false, ...sc.world });
  reset();
  setRunning(false);
  act(() => { actions = script(demo, sc); });
  showStory(sc);
  updateLink();
}

// The explanation panel: the story, the checker's verdict on this run and,
// where the scenario compares, on the naive variant's run of the same script.
function showStory(sc, given) {
  story = sc;
  const box = $('story');
  box.hidden = !sc;
  for (const li of document.querySelectorAll('#requests li.hl, #log li.hl')) li.classList.remove('hl');
  if (!sc) { delete box.dataset.scenario; return; }
  const ours = given ? given.ours : JSON.parse(demo.state()).violations;
  $('story-title').textContent = sc.title;
  $('story-text').textContent = sc.explain;
  const verdict = (v) => v.length === 0 ? 'no safety violation' : `${v.length} violation(s): ${v.join('; ')}`;
  let text = `Checker, this run: ${verdict(ours)}.`;
  box.dataset.verdict = ours.length === 0 ? 'safe' : 'violated';
  if (given) {
    text += ` The same deliveries with the probe off: ${verdict(given.naive)}.`;
    box.dataset.naiveVerdict = given.naive.length === 0 ? 'safe' : 'violated';
  } else if (sc.compare) {
    const naive = build({ ...sc.world, naive: true });
    script(naive, sc);
    const v = JSON.parse(naive.state()).violations;
    naive.free();
    text += ` The naive variant, same script: ${verdict(v)}.`;
    box.dataset.naiveVerdict = v.length === 0 ? 'safe' : 'violated';
  } else {
    delete box.dataset.naiveVerdict;
  }
  $('story-verdict').textContent = text;
  box.dataset.scenario = sc.id;
  markHighlights();
}

function inHighlight(e) {
  const h = story && story.highlight;
  return !!h && e.at >= h.from && e.at <= h.to && (h.node === undefined || e.node === h.node);
}

function markHighlights() {
  for (const li of document.querySelectorAll('#requests li[data-i], #log li[data-i]')) {
    li.classList.toggle('hl', inHighlight(entries[Number(li.dataset.i)]));
  }
}

// The link that replays this run: the world's settings, every action with
// its time, the time now, and the scenario shown.
function linkHash() {
  const w = built || settings();
  const p = new URLSearchParams({
    p: w.protocol, naive: w.naive ? '1' : '0', n: String(w.nodes), ttl: String(w.ttl), seed: String(w.seed),
  });
  if (actions.length) p.set('a', actions.map((a) => `${a.kind}.${a.node}.${a.ms}@${a.t}`).join(','));
  if (demo) p.set('t', String(demo.now_ms()));
  if (story) p.set('scenario', story.id);
  return '#' + p.toString();
}

function updateLink() {
  const hash = linkHash();
  history.replaceState(null, '', hash);
  $('share').value = location.href;
}

// Replays a link: the world, its actions, up to its time, paused there.
function load(hash) {
  const p = new URLSearchParams(hash.replace(/^#/, ''));
  const told = p.get('scenario') && scenario(p.get('scenario'));
  if (told && told.jobs) {
    reset();
    runScenario(told.id);
    return true;
  }
  if (!p.has('p')) return false;
  const num = (k, d) => (p.has(k) ? Number(p.get(k)) : d);
  setSettings({ protocol: p.get('p'), naive: p.get('naive') === '1', nodes: num('n', 3), ttl: num('ttl', 10), seed: num('seed', 1) });
  reset();
  setRunning(false);
  act(() => {
    const list = (p.get('a') || '').split(',').filter(Boolean).map((s) => {
      const m = s.match(/^([a-z_0-9]+)\.(\d+)\.(-?\d+)@(\d+)$/);
      if (!m) throw new Error(`bad action in the link: ${s}`);
      return { kind: m[1], node: Number(m[2]), ms: Number(m[3]), t: Number(m[4]) };
    });
    for (const a of list) { perform(demo, a); actions.push(a); }
    const t = num('t', 0);
    if (t > demo.now_ms()) demo.advance(t - demo.now_ms());
  });
  const sc = p.get('scenario') && scenario(p.get('scenario'));
  if (sc) showStory(sc);
  updateLink();
  return true;
}

function act(fn) {
  try {
    clearError();
    fn();
  } catch (e) {
    showError(e);
  }
  refresh();
}

function seconds(ms) {
  return (ms / 1000).toFixed(3) + ' s';
}

function fetchTimeline() {
  const fresh = JSON.parse(demo.timeline(entries.length));
  for (const e of fresh) {
    entries.push(e);
    const who = e.node === null ? 'store' : `node-${e.node}`;
    const li = document.createElement('li');
    li.className = e.kind + (inHighlight(e) ? ' hl' : '');
    li.dataset.i = e.i;
    li.textContent = `${seconds(e.at)} ${who} ${e.kind === 'reply' ? '← ' : ''}${e.text}`;
    if (e.kind === 'call') {
      const req = li.cloneNode(true);
      req.tabIndex = 0;
      $('requests').prepend(req);
      trim($('requests'));
    }
    if (e.kind !== 'call') {
      $('log').prepend(li);
      trim($('log'));
    }
  }
  return fresh.length > 0;
}

function trim(list) {
  while (list.children.length > MAX_LIST) list.lastElementChild.remove();
}

function showRequest() {
  const calls = $('requests');
  const index = selected ?? (calls.firstElementChild ? Number(calls.firstElementChild.dataset.i) : null);
  for (const li of calls.children) li.classList.toggle('selected', Number(li.dataset.i) === index);
  if (index === null) return;
  const r = JSON.parse(demo.request(index, $('sign').checked));
  const path = r.url.replace(/^https?:\/\/[^/]+/, '');
  const host = r.url.match(/^https?:\/\/([^/]+)/)[1];
  const lines = [`${r.method} ${path} HTTP/1.1`];
  if (!r.headers.some(([name]) => name === 'host')) lines.push(`host: ${host}`);
  for (const [name, value] of r.headers) lines.push(`${name}: ${value}`);
  $('request-detail').textContent = lines.join('\n') + '\n\n' + r.body;
}

// Rows are rebuilt only when a node appears or goes up or down (its
// buttons change); otherwise only their text is updated, so that a button
// is never replaced under the pointer between press and release.
function renderNodes(state) {
  const shape = JSON.stringify(state.nodes.map((n) => n.alive));
  const body = $('nodes').tBodies[0];
  if (shape !== lastNodes) {
    lastNodes = shape;
    body.replaceChildren(...state.nodes.map((n, i) => {
      const tr = document.createElement('tr');
      for (let c = 0; c < 4; c++) tr.append(document.createElement('td'));
      const td = document.createElement('td');
      const buttons = n.alive
        ? [['kill', 'kill'], ['pause', 'pause'], ['pause_before_write', 'pause before write'],
           ['offset', 'set clock'], ['release', 'release'], ['remove', 'remove']]
        : [['restart', 'restart']];
      for (const [action, label] of buttons) {
        const b = document.createElement('button');
        b.textContent = label;
        b.setAttribute('aria-label', `${label} node-${i}`);
        b.dataset.action = action;
        b.dataset.node = i;
        td.append(b);
      }
      tr.append(td);
      return tr;
    }));
  }
  state.nodes.forEach((n, i) => {
    const tr = body.rows[i];
    const status = !n.alive ? (n.resigned ? 'removed' : 'killed')
      : n.paused_for_ms !== null ? `paused (${(n.paused_for_ms / 1000).toFixed(1)} s left)` : 'running';
    tr.className = n.holding ? 'holding' : (n.alive ? '' : 'down');
    const cells = [
      n.holding ? `${n.name} ★` : n.name,
      status,
      n.holding ? `token ${n.holding.token}, until ${seconds(n.holding.until_ms)}` : '',
      n.offset_ms === 0 ? 'in sync' : `${n.offset_ms > 0 ? '+' : ''}${n.offset_ms / 1000} s`,
    ];
    cells.forEach((text, c) => {
      if (tr.cells[c].textContent !== text) tr.cells[c].textContent = text;
    });
  });
}

function renderLease(state) {
  const holders = state.nodes.map((n, i) => [i, n]).filter(([, n]) => n.holding);
  const leader = $('leader');
  if (holders.length === 1) {
    const [i, n] = holders[0];
    leader.textContent = `node-${i} holds token ${n.holding.token}`;
    leader.dataset.node = i;
    leader.dataset.token = n.holding.token;
  } else {
    leader.textContent = holders.length === 0 ? 'no holder'
      : 'several believe they hold: ' + holders.map(([i, n]) => `node-${i} (token ${n.holding.token})`).join(', ');
    delete leader.dataset.node;
    delete leader.dataset.token;
  }
  $('lease-key').textContent = state.lease_key + (state.protocol === 'epochs' ? '/<epoch>.json' : '');
  if (state.lease) {
    $('lease-etag').textContent = state.lease.etag;
    let body = state.lease.body;
    try { body = JSON.stringify(JSON.parse(body), null, 2); } catch (_) { /* shown raw */ }
    $('lease-body').textContent = body;
  } else {
    $('lease-etag').textContent = '(none)';
    $('lease-body').textContent = '(no object)';
  }
  $('protected').textContent = state.protected
    ? `etag ${state.protected.etag}\ntoken ${state.protected.token}\n${state.protected.payload}`
    : (state.fences ? '(no object)' : '(this protocol gives no fencing token: nothing is written)');
  $('counters').textContent = Object.entries(state.counters).map(([k, v]) => `${k}: ${v}`).join('\n');
  $('armed').textContent = state.armed.length ? 'armed: ' + state.armed.join(', ') : '';
  $('clock').textContent = `t = ${seconds(state.now_ms)}`;

  const violation = $('violation');
  violation.hidden = state.violations.length === 0;
  violation.textContent = 'Safety violated: ' + state.violations.join('; ');
  const fenced = $('fenced');
  fenced.hidden = state.counters.fenced_rejected === 0;
  fenced.textContent = `Fencing refused ${state.counters.fenced_rejected} write(s) from a holder whose token is stale (a zombie).`;
}

function draw(state) {
  const canvas = $('timeline');
  const width = canvas.clientWidth;
  const lanes = Math.max(state.nodes.length, 1);
  const laneH = 34;
  const height = 24 + lanes * laneH;
  const ratio = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.height = height + 'px';
  }
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  const left = 64;
  const span = Math.max(6 * state.ttl_ms, 30000);
  const end = Math.max(state.now_ms, span);
  const start = end - span;
  const x = (t) => left + ((t - start) / span) * (width - left - 8);
  const css = getComputedStyle(document.documentElement);
  const color = (name) => css.getPropertyValue(name).trim();

  g.font = '11px system-ui, sans-serif';
  const h = story && story.highlight;
  if (h && x(h.to) > left) {
    g.fillStyle = 'rgba(250, 176, 5, 0.22)';
    const x0 = Math.max(x(h.from), left);
    g.fillRect(x0, 14, Math.max(x(h.to) - x0, 3), height - 14);
  }
  g.fillStyle = color('--muted');
  // Labels at least 48 px apart, whatever the width.
  const every = [1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000]
    .find((d) => (d / span) * (width - left - 8) >= 48) || 300000;
  for (let t = Math.ceil(start / every) * every; t <= end; t += every) {
    g.fillRect(x(t), 14, 1, height - 14);
    g.fillText(`${t / 1000}s`, x(t) + 2, 11);
  }
  state.nodes.forEach((n, i) => {
    const y = 20 + i * laneH;
    g.fillStyle = n.alive ? color('--fg') : color('--muted');
    g.fillText(n.name, 4, y + 18);
    g.fillStyle = '#f1f3f5';
    g.fillRect(left, y + laneH - 3, width - left, 1);
  });
  for (const b of JSON.parse(demo.beliefs(start))) {
    const y = 20 + b.node * laneH;
    const x0 = Math.max(x(b.start), left);
    const x1 = x(b.end);
    g.fillStyle = color('--hold');
    g.fillRect(x0, y + 8, Math.max(x1 - x0, 2), 14);
    g.fillStyle = '#fff';
    if (x1 - x0 > 40) g.fillText(`token ${b.token}`, x0 + 4, y + 19);
  }
  for (let k = entries.length - 1; k >= 0 && entries[k].at >= start; k--) {
    const e = entries[k];
    if (e.node === null) continue;
    const y = 20 + e.node * laneH;
    const px = x(e.at);
    if (e.kind === 'call') { g.fillStyle = color('--call'); g.fillRect(px, y + 1, 1.5, 7); }
    else if (e.kind === 'reply') { g.fillStyle = color('--reply'); g.fillRect(px, y + 22, 1.5, 7); }
    else if (e.kind === 'event') { g.fillStyle = color('--event'); g.fillRect(px - 2, y + 26, 4, 4); }
    else {
      g.fillStyle = color('--fault');
      g.beginPath();
      g.moveTo(px, y + 2); g.lineTo(px - 5, y + 12); g.lineTo(px + 5, y + 12);
      g.fill();
    }
  }
  g.fillStyle = color('--fault');
  g.fillRect(x(state.now_ms), 14, 1, height - 14);
}

function refresh() {
  if (!demo) return;
  const fresh = fetchTimeline();
  const state = JSON.parse(demo.state());
  renderNodes(state);
  renderLease(state);
  if (fresh || selected !== null) showRequest();
  draw(state);
}

// The scheduled-job view: its own module (lease-web-jobs), loaded when
// the view is first opened, so the demo's first load stays small.
let jobs = null;
let Ticks = null;

async function openJobs(show) {
  const box = $('jobs');
  box.hidden = show === true ? false : !box.hidden;
  $('jobs-open').setAttribute('aria-expanded', String(!box.hidden));
  if (box.hidden || Ticks) return;
  try {
    const mod = await import('./pkg/lease_web_jobs.js');
    await mod.default();
    Ticks = mod.Ticks;
    resetJobs();
  } catch (e) {
    showError(e);
  }
}

function resetJobs(seed) {
  if (!Ticks) return;
  act(() => {
    const next = new Ticks(Math.round(Number($('jobs-ttl').value) * 1000),
      Math.round(Number($('jobs-len').value) * 1000), seed ?? Number($('seed').value),
      $('jobs-store').value, $('jobs-probe').checked);
    if (jobs) jobs.free();
    jobs = next;
  });
  renderJobs();
}

function deliver(extraNode, limitMs) {
  if (!jobs) return;
  const tick = Number($('jobs-tick').value);
  const node = Number($('jobs-node').value);
  act(() => {
    jobs.deliver(tick, node, limitMs);
    if (extraNode) jobs.deliver(tick, (node + 1) % 8, limitMs);
  });
  renderJobs();
}

function renderJobs() {
  if (!jobs) return;
  const s = JSON.parse(jobs.state());
  $('jobs-clock').textContent = `t = ${seconds(s.now_ms)}`;
  const rows = s.runs.map((r) => {
    const tr = document.createElement('tr');
    const job = r.job ? `${seconds(r.job[0])} to ${r.job[1] === null ? 'now' : seconds(r.job[1])}` : 'did not run';
    const cells = [seconds(r.delivered), `instance-${r.node}`, r.tick, r.outcome ?? 'running…', job];
    cells.forEach((text, c) => {
      const td = document.createElement('td');
      td.textContent = text;
      if (c === 3) td.className = r.class;
      tr.append(td);
    });
    tr.dataset.class = r.class;
    return tr;
  });
  const body = $('jobs-runs').tBodies[0];
  const text = rows.map((r) => r.textContent).join('|');
  if (body.dataset.text !== text) {
    body.dataset.text = text;
    body.replaceChildren(...rows);
  }
  $('jobs-record').textContent = s.record
    ? `etag ${s.record.etag}\nholder ${s.record.holder} token ${s.record.token}, ${s.record.released ? 'released' : 'held'}\ncompleted ticks: ${(s.record.ticks || []).join(', ') || '(none)'}`
    : '(no object)';
  const verdict = $('jobs-verdict');
  verdict.className = 'banner ' + (s.violations.length ? 'bad' : 'good');
  verdict.textContent = s.violations.length
    ? 'Checker: ' + s.violations.join('; ')
    : 'Checker: no two jobs at once, no tick completed twice.';
  verdict.dataset.verdict = s.violations.length ? 'violated' : 'safe';
}

// A scenario told on the scheduled-job view: deliveries at time zero, run
// to `until`; compared with the same deliveries with the probe off.
async function runJobsScenario(sc) {
  await openJobs(true);
  if (!Ticks) return;
  setRunning(false);
  $('jobs-store').value = sc.jobs.store;
  $('jobs-probe').checked = true;
  $('jobs-ttl').value = sc.jobs.ttl;
  $('jobs-len').value = sc.jobs.job;
  resetJobs(sc.jobs.seed);
  const play = (t) => {
    for (const [tick, node] of sc.jobs.deliver) t.deliver(tick, node, 0);
    t.advance(sc.until);
    return JSON.parse(t.state()).violations;
  };
  let ours = [];
  let naive = [];
  act(() => {
    ours = play(jobs);
    const off = new Ticks(sc.jobs.ttl * 1000, sc.jobs.job * 1000, sc.jobs.seed, sc.jobs.store, false);
    naive = play(off);
    off.free();
  });
  renderJobs();
  showStory(sc, { ours, naive });
  $('jobs').scrollIntoView();
  updateLink();
}

function frame(now) {
  if (running && jobs && !$('jobs').hidden && lastFrame !== null) {
    try {
      jobs.advance(Math.round(Math.min(now - lastFrame, 100) * Number($('speed').value)));
    } catch (e) {
      showError(e);
    }
    renderJobs();
  }
  if (running && demo && lastFrame !== null) {
    const dt = Math.min(now - lastFrame, 100);
    try {
      demo.advance(Math.round(dt * Number($('speed').value)));
    } catch (e) {
      showError(e);
    }
    refresh();
  }
  lastFrame = now;
  requestAnimationFrame(frame);
}

function wire() {
  $('reset').onclick = reset;
  for (const id of ['protocol', 'naive']) $(id).onchange = reset;
  $('run').onclick = () => setRunning(!running);
  $('step').onclick = () => act(() => {
    setRunning(false);
    record('step');
  });
  $('add-node').onclick = () => act(() => record('add'));
  for (const b of document.querySelectorAll('[data-store]')) {
    b.onclick = () => act(() => record(b.dataset.store));
  }
  $('nodes').onclick = (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const node = Number(b.dataset.node);
    const action = b.dataset.action;
    const ms = Math.round((action === 'offset' ? Number($('offset-seconds').value)
      : Number($('pause-seconds').value)) * 1000);
    act(() => record(action, node, ms));
  };
  $('requests').onclick = (ev) => {
    const li = ev.target.closest('li[data-i]');
    if (!li) return;
    selected = Number(li.dataset.i);
    showRequest();
  };
  $('requests').onkeydown = (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); ev.target.click(); }
  };
  $('sign').onchange = showRequest;
  const list = $('scenarios');
  for (const sc of SCENARIOS) {
    const b = document.createElement('button');
    b.textContent = sc.title;
    b.dataset.scenario = sc.id;
    b.onclick = () => runScenario(sc.id);
    list.append(b);
  }
  $('jobs-open').onclick = () => openJobs();
  $('jobs-reset').onclick = () => resetJobs();
  $('jobs-deliver').onclick = () => deliver(false, 0);
  $('jobs-duplicate').onclick = () => deliver(true, 0);
  // Time for the lease's requests and half the job: the run starts, and is
  // stopped before the invocation's time runs out (a job shorter than the
  // release's reserve finishes first).
  $('jobs-late').onclick = () => deliver(false, jobs
    ? Math.max(jobs.time_needed_ms(), jobs.release_reserve_ms() + Number($('jobs-len').value) * 500) : 0);
  $('jobs-next').onclick = () => {
    $('jobs-tick').value = Number($('jobs-tick').value) + 1;
    $('jobs-node').value = (Number($('jobs-node').value) + 1) % 3;
    deliver(false, 0);
  };
  $('story-close').onclick = () => { showStory(null); updateLink(); };
  $('copy-link').onclick = () => {
    updateLink();
    $('share').select();
    navigator.clipboard?.writeText($('share').value).catch(() => { /* the field shows it */ });
  };
}

await init();
wire();
if (!load(location.hash)) reset();
requestAnimationFrame(frame);
