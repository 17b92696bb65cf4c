// The demo page: drives lease-web's Demo (the simulator in WebAssembly)
// on animation frames and draws what it reports. No logic of the protocol
// lives here: the page only asks the world for JSON and renders it.
import init, { Demo } from './pkg/lease_web.js';

const $ = (id) => document.getElementById(id);
const MAX_LIST = 300;

let demo = null;
let entries = [];       // timeline entries fetched so far
let running = true;
let lastFrame = null;
let selected = null;    // timeline index of the request shown
let lastNodes = '';

function showError(e) {
  const box = $('error');
  box.textContent = String(e);
  box.hidden = false;
}

function clearError() {
  $('error').hidden = true;
}

function reset() {
  clearError();
  const nodes = Number($('node-count').value);
  const ttl = Math.round(Number($('ttl').value) * 1000);
  const seed = Number($('seed').value);
  let next;
  try {
    next = new Demo(nodes, ttl, $('protocol').value, $('naive').checked, seed);
  } catch (e) {
    showError(e);
    return;
  }
  if (demo) demo.free();
  demo = next;
  entries = [];
  selected = null;
  lastNodes = '';
  $('requests').replaceChildren();
  $('log').replaceChildren();
  $('request-detail').textContent = 'Each store call appears here as the exact HTTP request the core renders for S3.';
  refresh();
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
    li.className = e.kind;
    li.textContent = `${seconds(e.at)} ${who} ${e.kind === 'reply' ? '← ' : ''}${e.text}`;
    if (e.kind === 'call') {
      const req = li.cloneNode(true);
      req.dataset.i = e.i;
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
      n.name,
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
  g.fillStyle = color('--muted');
  for (let t = Math.ceil(start / 5000) * 5000; t <= end; t += 5000) {
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

function frame(now) {
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
  $('run').onclick = () => {
    running = !running;
    $('run').textContent = running ? 'Pause' : 'Run';
    $('run').setAttribute('aria-pressed', String(running));
  };
  $('step').onclick = () => act(() => {
    running = false;
    $('run').textContent = 'Run';
    $('run').setAttribute('aria-pressed', 'false');
    demo.step();
  });
  $('add-node').onclick = () => act(() => demo.add_node());
  for (const b of document.querySelectorAll('[data-store]')) {
    b.onclick = () => act(() => demo.fault(b.dataset.store, 0, 0));
  }
  $('nodes').onclick = (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const node = Number(b.dataset.node);
    const action = b.dataset.action;
    const ms = action === 'offset' ? Number($('offset-seconds').value) * 1000
      : Number($('pause-seconds').value) * 1000;
    act(() => demo.fault(action, node, ms));
  };
  $('requests').onclick = (ev) => {
    const li = ev.target.closest('li[data-i]');
    if (!li) return;
    selected = Number(li.dataset.i);
    showRequest();
  };
  $('sign').onchange = showRequest;
}

await init();
wire();
reset();
requestAnimationFrame(frame);
