// One benchmark process: a worker, or a producer, of one system. Imports its
// library first, says "ready", and starts only when told, so that the
// processes of a run start together and library loading is not measured.
const [systemName, url, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson);
const system = await import(`./systems/${systemName}.mjs`);

const now = () => performance.timeOrigin + performance.now();
const send = (m) => process.send?.(m);
let firstAt = null;
let lastAt = null;
let handled = 0;
const latencies = [];
const rss = [];
let rssTimer;

function handle(args) {
  const t = now();
  if (firstAt === null) firstAt = t;
  lastAt = t;
  handled++;
  if (args && typeof args.t === 'number') latencies.push(t - args.t);
}

function sampleRss() {
  const m = process.memoryUsage();
  rss.push(m.rss);
  if (process.env.STAMPEDED_BENCH_MEMORY) process.stderr.write(`rss ${m.rss >> 20} heapTotal ${m.heapTotal >> 20} heapUsed ${m.heapUsed >> 20} external ${m.external >> 20} arrayBuffers ${m.arrayBuffers >> 20}\n`);
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

async function work() {
  const worker = await system.startWorker(url, { concurrency: options.concurrency, queues: options.queues, handle });
  const stopProfiling = await allocationProfiler();
  rssTimer = setInterval(sampleRss, 250);
  sampleRss();
  const cpuStart = process.cpuUsage();
  await new Promise((resolve) => process.once('message', (m) => m === 'stop' && resolve()));
  clearInterval(rssTimer);
  sampleRss();
  const cpu = process.cpuUsage(cpuStart);
  await stopProfiling();
  await worker.stop();
  return { firstAt, lastAt, handled, latencies, rss, cpuMs: (cpu.user + cpu.system) / 1000 };
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
        await producer.enqueueMany(Array.from({ length: n }, (_, k) => ({ i: i + k })), queue);
      }
    }
  } else if (options.mode === 'latency') {
    // One job every intervalMs, each stamped with the moment it was sent.
    const start = now();
    const pending = [];
    for (let i = 0; i < options.jobs; i++) {
      const wait = start + i * options.intervalMs - now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      pending.push(producer.enqueueOne({ t: now(), i }, q));
    }
    await Promise.all(pending);
  }
  await producer.close();
  return out;
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
process.once('message', async (m) => {
  if (m !== 'start') return;
  try {
    const result = options.mode === 'work' ? await work() : await enqueue();
    send({ result });
  } catch (err) {
    send({ error: String(err?.stack ?? err) });
  }
  process.disconnect?.();
  setTimeout(() => process.exit(0), 200).unref();
});
