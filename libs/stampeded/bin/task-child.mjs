// Runs one job of a task declared with isolation: 'process', in a process of
// its own: a crash, a leak or a hang here ends this process, not the worker.
// Plain JavaScript, so that it runs wherever the worker does.
import { pathToFileURL } from 'node:url';

let controller = new AbortController();
let nextRequest = 1;
const waiting = new Map();

function request(type, payload) {
  const id = nextRequest++;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    process.send({ type, id, payload });
  });
}

// ctx.log() lines, sent to the worker once a tick, each with the time it was
// written: a handler logging in a tight loop sends one message, not one a line.
// The worker cuts and counts them as it does its own handlers' lines.
let logged = [];
function sendLogged() {
  if (logged.length) process.send({ type: 'log', lines: logged });
  logged = [];
}
function log(message) {
  if (logged.length === 0) setImmediate(sendLogged);
  logged.push([Date.now(), typeof message === 'string' ? message : String(message)]);
}

function serialiseError(err) {
  if (err instanceof Error) {
    return {
      name: err.name,
      message: err.message,
      stack: err.stack,
      delayMs: typeof err.delayMs === 'number' ? err.delayMs : undefined,
    };
  }
  return { name: 'Error', message: String(err) };
}

process.on('message', async (message) => {
  if (message.type === 'abort') {
    controller.abort(new Error(message.reason ?? 'aborted'));
    return;
  }
  if (message.type === 'reply') {
    const entry = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error) entry?.reject(Object.assign(new Error(message.error.message), { name: message.error.name }));
    else entry?.resolve(message.value);
    return;
  }
  if (message.type !== 'run') return;
  const { file, args, ctx } = message;
  try {
    const mod = await import(file.startsWith('file:') ? file : pathToFileURL(file).href);
    const context = {
      ...ctx,
      signal: controller.signal,
      touch: () => request('touch'),
      saveCheckpoint: (state) => request('saveCheckpoint', state),
      // Checked and rate-limited in the worker, whose context writes it.
      progress: (value) => request('progress', value),
      log,
      // A workflow job's reads, made by the worker's context. childResults()
      // takes a task class only for its type, which cannot cross the channel.
      dependencies: () => request('dependencies'),
      childResults: () => request('childResults'),
      batch: () => request('batch'),
    };
    const fn = typeof mod.default === 'function' ? mod.default : mod.handle;
    if (typeof fn !== 'function') throw new Error(`${file} has no default export function (args, ctx) => ...`);
    const result = await fn(args, context);
    // The last lines go before the answer: the worker writes them before it records the outcome.
    sendLogged();
    process.send({ type: 'done', result: result === undefined ? null : result }, () => process.exit(0));
  } catch (err) {
    sendLogged();
    process.send({ type: 'error', error: serialiseError(err) }, () => process.exit(0));
  }
});

process.send({ type: 'ready' });
