import { fork } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { RetryAfterError, UnrecoverableError } from '../errors/stampeded.errors.js';
import type { RegisteredTask } from '../explorer/task.registry.js';
import type { Job, JobProgress } from '../interfaces/job.interface.js';
import type { JobContext } from '../interfaces/task.interface.js';
import { TASK_PROCESS_EXITED } from '../stampeded.messages.js';

/** The child died before answering: the job failed with `worker_exited`. */
export class WorkerExitedError extends Error {
  override name = 'WorkerExitedError';
  readonly workerExited = true;
  constructor(
    message: string,
    readonly exitStatus: number,
  ) {
    super(message);
  }
}

function childScript(): string {
  // src/isolation and dist/isolation both sit two levels below the package root.
  return fileURLToPath(new URL('../../bin/task-child.mjs', import.meta.url));
}

/**
 * Runs a job of an isolation: 'process' task in a child process of its own,
 * one per job: a segfault, an out-of-memory kill or process.exit() ends the
 * child, and the worker records `worker_exited` with the exit status (128 +
 * the signal number for a signal, as a shell reports it).
 */
export class ProcessTaskRunner {
  /** `log` takes the child's ctx.log() lines, each with the time the child wrote it. */
  run(task: RegisteredTask, job: Job, ctx: JobContext, signal: AbortSignal, log: (message: string, at: Date) => void): Promise<unknown> {
    // The registry refused a task without one.
    const file = String(task.metadata.processFile);

    return new Promise((resolve, reject) => {
      const child = fork(childScript(), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
      let answered = false;
      const onAbort = () => {
        if (child.connected) child.send({ type: 'abort', reason: String((signal.reason as Error)?.message ?? 'aborted') });
        // A child that ignores its signal is stopped after a grace period.
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      };
      signal.addEventListener('abort', onAbort, { once: true });

      child.on('message', async (message: any) => {
        if (message.type === 'ready') {
          child.send({
            type: 'run',
            file,
            args: job.args,
            ctx: {
              id: ctx.id,
              queue: ctx.queue,
              task: ctx.task,
              attempt: ctx.attempt,
              maxAttempts: ctx.maxAttempts,
              tenantId: ctx.tenantId,
              destination: ctx.destination,
              orderingKey: ctx.orderingKey,
              meta: ctx.meta,
              checkpoint: ctx.checkpoint,
            },
          });
        } else if (message.type === 'log') {
          // Sent without waiting for an answer, a tick's lines at a time: ctx.log() returns at once in the child too.
          for (const [at, line] of message.lines as [number, string][]) log(line, new Date(at));
        } else if (CONTEXT_CALLS.has(message.type)) {
          try {
            const value = await callContext(ctx, message.type, message.payload);
            if (child.connected) child.send({ type: 'reply', id: message.id, value: value ?? null });
          } catch (err) {
            if (child.connected) child.send({ type: 'reply', id: message.id, error: { name: (err as Error).name, message: (err as Error).message } });
          }
        } else if (message.type === 'done') {
          answered = true;
          resolve(message.result);
        } else if (message.type === 'error') {
          answered = true;
          reject(reviveError(message.error));
        }
      });
      // 'close', not 'exit': 'exit' can come before the child's last IPC
      // message has been read, and a job that answered would be recorded as
      // a child that died. 'close' comes once the channel is drained.
      child.on('close', (code, sig) => {
        signal.removeEventListener('abort', onAbort);
        if (answered) return;
        const status = code ?? 128 + (sig ? (constants.signals[sig] ?? 0) : 0);
        reject(new WorkerExitedError(TASK_PROCESS_EXITED(job.id, status, sig), status));
      });
      child.on('error', (err) => {
        if (!answered) reject(err);
      });
    });
  }
}

/**
 * What the child's context asks of the worker's: each reads or writes the
 * database through the worker's pool and its outcome fence, so the child
 * holds no connection of its own. Results cross as JSON (structured clone).
 */
const CONTEXT_CALLS = new Set(['touch', 'saveCheckpoint', 'progress', 'dependencies', 'childResults', 'batch']);

function callContext(ctx: JobContext, call: string, payload: unknown): Promise<unknown> {
  switch (call) {
    case 'touch':
      return ctx.touch();
    case 'progress':
      return ctx.progress(payload as JobProgress);
    case 'saveCheckpoint':
      return ctx.saveCheckpoint(payload);
    case 'dependencies':
      return ctx.dependencies();
    case 'childResults':
      return ctx.childResults();
    default:
      return ctx.batch();
  }
}

function reviveError(e: { name: string; message: string; stack?: string; delayMs?: number }): Error {
  let err: Error;
  if (e.name === 'UnrecoverableError') err = new UnrecoverableError(e.message);
  else if (e.name === 'RetryAfterError' && typeof e.delayMs === 'number') err = new RetryAfterError(e.delayMs, e.message);
  else {
    err = new Error(e.message);
    err.name = e.name;
  }
  if (e.stack) err.stack = e.stack;
  return err;
}
