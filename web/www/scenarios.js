// The guided scenarios: each one sets up a world (the real core in
// WebAssembly, see app.js), applies its faults at fixed moments, runs to
// the interesting moment and stops there with a short explanation. Worlds
// are deterministic (the seed draws every latency), so a scenario replays
// the same run every time, on every machine.
//
// A step's `at` is a simulated time in ms, or 'leader': the first moment
// a node holds the lease. Its `node` is a number, 'leader' (the node that
// holds the lease then) or 'next' (the node after it). `compare` runs the
// same script in the naive variant beside it and shows what its checker
// found there. `highlight` picks the timeline entries the explanation is
// about: a time window in ms, and optionally the node. A scenario with
// `jobs` is told on the scheduled-job view instead: its deliveries (tick,
// instance) at time zero on that store, compared with the probe off.

export const SCENARIOS = [
  {
    id: 'retry-412',
    title: 'A write whose success looks like a failure',
    world: { protocol: 'cas', nodes: 3, ttl: 10, seed: 1 },
    steps: [{ at: 3000, fault: '5xx' }],
    until: 4500,
    highlight: { from: 3700, to: 4100, node: 2 },
    explain: 'node-2 renews: its PUT If-Match is applied, but the store answers 500. ' +
      'Sent again, the same PUT would get 412, because its own write changed the etag, and a ' +
      'client that reads 412 as "someone else holds it" steps down from a lease it holds. ' +
      'lease-core re-reads instead: the record carries node-2\'s nonce, so the renewal landed and ' +
      'node-2 leads on with token 1.',
  },
  {
    id: 'pause-fence',
    title: 'A pause past the lease, and the stale write refused',
    world: { protocol: 'cas', nodes: 3, ttl: 10, seed: 1 },
    steps: [{ at: 'leader', fault: 'pause_before_write', node: 'leader', ms: 20000 }],
    until: 24500,
    compare: true,
    highlight: { from: 23600, to: 24000 },
    explain: 'node-2 checked it was leader, then froze for 20 s (a GC pause) before writing. ' +
      'Its lease expired and node-0 took over with token 2. When node-2 wakes, its write still ' +
      'carries token 1: the protected object holds token 2, so the write is refused (fencing). ' +
      'The naive client writes with a plain PUT and overwrites the newer leader\'s data.',
  },
  {
    id: 'clock-skew',
    title: 'A wall clock 25 s ahead',
    world: { protocol: 'cas', nodes: 3, ttl: 10, seed: 2 },
    steps: [{ at: 'leader', fault: 'offset', node: 'next', ms: 25000 }],
    until: 12000,
    compare: true,
    highlight: { from: 0, to: 1500 },
    explain: 'One node\'s wall clock jumps 25 s ahead. lease-core never compares wall clocks: ' +
      'expiry is judged by the store\'s Date and measured on each node\'s monotonic clock, so ' +
      'the skewed node keeps waiting. The naive client reads the leader\'s expires_at by its own ' +
      'clock, thinks the lease lapsed, and takes it: two holders at once.',
  },
  {
    id: 'lost-reply',
    title: 'A lost reply, settled by the nonce',
    world: { protocol: 'cas', nodes: 3, ttl: 10, seed: 1 },
    steps: [{ at: 0, fault: 'drop_reply' }],
    until: 2500,
    highlight: { from: 250, to: 2200, node: 2 },
    explain: 'node-2\'s create (PUT If-None-Match: *) is applied, but the reply never arrives. ' +
      'Did it win? After its timeout node-2 reads the lease: the record carries the nonce it ' +
      'sent, so the write was its own, and it holds token 1. The others see node-2 as leader ' +
      'the whole time: nobody is told a lease it does not have.',
  },
  {
    id: 'throttled',
    title: 'Throttled: 429 and backoff',
    world: { protocol: 'cas', nodes: 3, ttl: 10, seed: 1 },
    steps: [{ at: 'leader', fault: '429' }],
    until: 4000,
    highlight: { from: 600, to: 1200 },
    explain: 'The store answers one call 429 (too many requests). The caller backs off with ' +
      'jitter and asks again; a Retry-After is obeyed, and never past the lease\'s deadline. ' +
      'Nothing was written by a throttled call, so nothing is re-read: the leader keeps token 1.',
  },
  {
    id: 'crash-takeover',
    title: 'The leader crashes: a takeover after the ttl',
    world: { protocol: 'cas', nodes: 3, ttl: 10, seed: 1 },
    steps: [{ at: 'leader', fault: 'kill', node: 'leader' }],
    until: 12500,
    highlight: { from: 11300, to: 11900 },
    explain: 'node-2 dies holding the lease; nobody releases it. The others keep reading the ' +
      'record; once its expiry has passed by the store\'s clock (plus the Date header\'s ' +
      'one-second resolution), node-1 takes it over with PUT If-Match on the dead leader\'s ' +
      'etag and token 2. A late write from node-2, were it to come back, would be fenced.',
  },
  {
    id: 'unsafe-store',
    title: 'A store that ignores conditions, refused by the probe',
    jobs: { store: 'ignores-conditions', seed: 1, ttl: 10, job: 10, deliver: [[1, 0], [1, 1]] },
    until: 15000,
    explain: 'Some S3-compatible servers accept If-None-Match and If-Match and then ignore them: ' +
      'every write succeeds. On such a store two instances delivered the same tick both "create" ' +
      'the lease and both run the job. Before its first run a Singleton probes the store (two ' +
      'creates of one scratch key, a stale If-Match, ...); here the second create is not ' +
      'refused, so every run refuses the store with UnsafeStore and nothing runs. With the probe ' +
      'off, the checker sees two jobs at once and the tick run twice.',
  },
  {
    id: 'protocol-cas',
    title: 'cas: one object, If-Match',
    world: { protocol: 'cas', nodes: 1, ttl: 10, seed: 1 },
    steps: [],
    until: 4500,
    highlight: { from: 0, to: 4000 },
    explain: 'cas reads the lease (GET: missing), creates it with PUT If-None-Match: * (token 1), ' +
      'then renews every ttl/3 with PUT If-Match on the etag it last wrote. One object, one ' +
      'request per renewal; a changed etag means someone else wrote.',
  },
  {
    id: 'protocol-epochs',
    title: 'epochs: one object per epoch',
    world: { protocol: 'epochs', nodes: 1, ttl: 10, seed: 1 },
    steps: [],
    until: 4500,
    highlight: { from: 0, to: 4300 },
    explain: 'epochs lists the key\'s epochs (LIST), marks the key as an epochs lease once, and ' +
      'creates epoch 1 with PUT If-None-Match: *. A renewal creates the next epoch the same way ' +
      'and deletes the old one: every write is a create, so it also works on stores with no ' +
      'If-Match.',
  },
  {
    id: 'protocol-mutex',
    title: 'mutex: create, then delete',
    world: { protocol: 'mutex', nodes: 1, ttl: 10, seed: 1 },
    steps: [],
    until: 4500,
    highlight: { from: 0, to: 1000 },
    explain: 'mutex is the plain lock: PUT If-None-Match: * to take it, DELETE If-Match to give ' +
      'it back. It cannot renew, so a holder has one ttl, and its tokens are the store\'s clock ' +
      'rather than a counter.',
  },
];

export function scenario(id) {
  return SCENARIOS.find((s) => s.id === id) || null;
}
