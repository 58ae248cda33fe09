// One benchmark process: a worker, or a producer, of one system. Imports its
// library first, says "ready", and starts only when told, so that the
// processes of a run start together and library loading is not measured.
//
// A worker counts the jobs its handler ran and tells the parent (a message
// every 50 ms when the count moved, and at once when it reaches
// options.target, which the parent may lower as other processes report), so
// that the parent needs no query while a run goes on: every system is watched
// the same way, at the same cost.
const [systemName, url, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson);
const system = await import(`./systems/${systemName}.mjs`);

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const send = (m) => process.connected && process.send?.(m);
const PROGRESS_MS = 50;
let firstAt = null;
let lastAt = null;
let handled = 0;
let target = options.target ?? Infinity;
let reported = 0;
const rss = [];
let rssTimer;

// Jobs stamped with the moment they were sent ({ t }): how long each waited
// (insert to start) and when it started, in typed arrays that grow by
// doubling (a steady run records hundreds of thousands).
let waited = new Float64Array(1024);
let startedAt = new Float64Array(1024);
let stamped = 0;
function record(wait, t) {
  if (stamped === waited.length) {
    const grow = (a) => {
      const b = new Float64Array(a.length * 2);
      b.set(a);
      return b;
    };
    waited = grow(waited);
    startedAt = grow(startedAt);
  }
  waited[stamped] = wait;
  startedAt[stamped] = t;
  stamped++;
}

function report() {
  if (handled === reported) return;
  reported = handled;
  send({ handled });
}

function handle(args) {
  const t = now();
  if (firstAt === null) firstAt = t;
  lastAt = t;
  handled++;
  if (args && typeof args.t === 'number') record(t - args.t, t);
  if (handled === target) report();
}

function sampleRss() {
  const m = process.memoryUsage();
  rss.push(m.rss);
  if (process.env.STAMPEDED_BENCH_MEMORY)
    process.stderr.write(
      `rss ${m.rss >> 20} heapTotal ${m.heapTotal >> 20} heapUsed ${m.heapUsed >> 20} external ${m.external >> 20} arrayBuffers ${m.arrayBuffers >> 20}\n`,
    );
}

/**
 * STAMPEDED_BENCH_ALLOCATIONS=file.heapprofile: a sampling profile of every
 * allocation during the work, collected or not (diagnosis: what makes garbage).
 */
async function allocationProfiler() {
  const file = process.env.STAMPEDED_BENCH_ALLOCATIONS;
  if (!file) return async () => {};
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 16384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    writeFileSync(`${file}.${process.pid}.heapprofile`, JSON.stringify(profile));
  };
}

let stopRequested;
const stopped = new Promise((resolve) => (stopRequested = resolve));

async function work() {
  const progressTimer = setInterval(report, PROGRESS_MS);
  const worker = await system.startWorker(url, { concurrency: options.concurrency, queues: options.queues, handle });
  const stopProfiling = await allocationProfiler();
  rssTimer = setInterval(sampleRss, 250);
  sampleRss();
  const cpuStart = process.cpuUsage();
  await stopped;
  clearInterval(rssTimer);
  clearInterval(progressTimer);
  sampleRss();
  const cpu = process.cpuUsage(cpuStart);
  await stopProfiling();
  await worker.stop();
  return {
    firstAt,
    lastAt,
    handled,
    latencies: waited.slice(0, stamped),
    startedAt: startedAt.slice(0, stamped),
    rss,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

async function enqueue() {
  const producer = await system.openProducer(url);
  const q = options.queues?.[0];
  const out = {};
  if (options.mode === 'enqueue-bulk') {
    const datas = Array.from({ length: options.jobs }, (_, i) => ({ i }));
    const t = now();
    // One call, or the system's chunks of it when its API wants them.
    for (let i = 0; i < datas.length; i += options.chunk ?? datas.length) {
      await producer.enqueueMany(datas.slice(i, i + (options.chunk ?? datas.length)), q);
    }
    out.ms = now() - t;
  } else if (options.mode === 'enqueue-single') {
    const t = now();
    for (let i = 0; i < options.jobs; i++) await producer.enqueueOne({ i }, q);
    out.ms = now() - t;
  } else if (options.mode === 'preload') {
    // Pre-insert for the processing scenarios: spread over the queues, in chunks.
    const queues = options.queues;
    const per = Math.ceil(options.jobs / queues.length);
    for (const queue of queues) {
      for (let i = 0; i < per; i += 5000) {
        const n = Math.min(5000, per - i);
        await producer.enqueueMany(
          Array.from({ length: n }, (_, k) => ({ i: i + k })),
          queue,
          { remove: options.remove },
        );
      }
    }
  } else if (options.mode === 'latency') {
    // One job every intervalMs, each stamped with the moment it was sent.
    const start = now();
    const pending = [];
    for (let i = 0; i < options.jobs; i++) {
      const wait = start + i * options.intervalMs - now();
      if (wait > 0) await sleep(wait);
      pending.push(producer.enqueueOne({ t: now(), i }, q));
    }
    await Promise.all(pending);
  } else if (options.mode === 'steady') {
    Object.assign(out, await steady(producer, q));
  }
  await producer.close();
  return out;
}

/**
 * options.rate jobs a second for options.seconds: every tickMs (10) one
 * enqueueMany of rate * tickMs / 1000 jobs, each stamped with the moment it
 * was sent. Ticks are kept to the clock (start + k * tickMs) and a batch does
 * not wait for the one before it (at most MAX_IN_FLIGHT at once, fewer than
 * the pools' ten connections). Nothing is sent after the deadline, so a
 * producer that fell behind sends fewer jobs than intended, and says so.
 */
async function steady(producer, q) {
  const MAX_IN_FLIGHT = 8;
  const tickMs = options.tickMs ?? 10;
  const perTick = Math.max(1, Math.round((options.rate * tickMs) / 1000));
  const ticks = Math.round((options.seconds * 1000) / tickMs);
  const inFlight = new Set();
  let failure;
  let sent = 0;
  let lateTicks = 0;
  let maxLagMs = 0;
  let lastSentAt = null;
  let i = 0;
  const start = now();
  const deadline = start + ticks * tickMs;
  for (let k = 0; k < ticks; k++) {
    if (failure) throw failure;
    const at = start + k * tickMs;
    const wait = at - now();
    if (wait > 0) await sleep(wait);
    const t = now();
    if (t >= deadline) break;
    const lag = t - at;
    if (lag > tickMs) lateTicks++;
    if (lag > maxLagMs) maxLagMs = lag;
    const datas = new Array(perTick);
    for (let j = 0; j < perTick; j++) datas[j] = { t, i: i++ };
    const p = producer.enqueueMany(datas, q).then(
      () => inFlight.delete(p),
      (err) => {
        inFlight.delete(p);
        failure ??= err;
      },
    );
    inFlight.add(p);
    sent += perTick;
    lastSentAt = t;
    if (inFlight.size >= MAX_IN_FLIGHT) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  if (failure) throw failure;
  const intended = perTick * ticks;
  return {
    intended,
    sent,
    startedAt: start,
    lastSentAt,
    committedAt: now(),
    lateTicks,
    maxLagMs,
    // Over the intended duration: a producer that kept up sends at `rate`.
    ratePerSecond: sent / ((ticks * tickMs) / 1000),
  };
}

// Installing runs here too, in a process of its own: the runner may have been
// started before the library was rebuilt, and a schema migrated by its older
// copy would not be the one these processes need.
if (options.mode === 'install') {
  await system.install(url, options.queues);
  await system.createQueues(url, options.queues, { unlogged: options.unlogged });
  send({ result: {} });
  process.disconnect?.();
  setTimeout(() => process.exit(0), 200).unref();
} else {
  send({ ready: true });
}

/** Sent, and written to the channel: a large result (a steady run's latencies) takes a while, and must not be cut off by disconnect or exit. */
const sendAll = (m) => new Promise((resolve) => (process.connected ? process.send(m, undefined, {}, () => resolve()) : resolve()));

async function run() {
  try {
    const result = options.mode === 'work' ? await work() : await enqueue();
    await sendAll({ result });
  } catch (err) {
    await sendAll({ error: String(err?.stack ?? err) });
  }
  process.disconnect?.();
  setTimeout(() => process.exit(0), 200).unref();
}

let running = false;
process.on('message', (m) => {
  if (m === 'start' && !running) {
    running = true;
    void run();
  } else if (m === 'stop') {
    stopRequested();
  } else if (typeof m?.target === 'number') {
    target = m.target;
    if (handled >= target) report();
  }
});
