import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../fixtures/worker-process/main.mjs', import.meta.url));

/** The task sets beside the fixture: test/fixtures/worker-process/<set>.tasks.mjs. */
export type TaskSet =
  'fleet' | 'control' | 'chaos' | 'lifecycle' | 'events' | 'ordering' | 'workflows' | 'reports' | 'encryption' | 'logs' | 'chunks' | 'debounce' | 'failover';

export interface WorkerProcessConfig {
  url: string;
  tasks: TaskSet;
  /** Merged into StampededModule.forRoot(). */
  stampeded?: Record<string, unknown>;
  /** registerQueue() options. */
  queues?: Record<string, unknown>[];
  /** This process's clock is off by this much. */
  skewMs?: number;
  /** 'nest': SIGTERM goes through app.enableShutdownHooks(), as in an application. */
  shutdown?: 'nest';
  /** 'report': unhandled rejections and exceptions are reported, not fatal. */
  unhandled?: 'report';
  /** V8 heap limit for this process, in MB. */
  maxOldSpaceMb?: number;
  /** fleet: the 'slow' task never finishes in this process. */
  hang?: boolean;
  /** fleet: declare the every-second 'tick' schedule. */
  tick?: boolean;
  /** control: while this file exists, the 'call' task's destination is down. */
  downFile?: string;
  /** encryption: the 'hold-secret' task finishes once this file exists. */
  releaseFile?: string;
  /** Connect through writableHostClient(hosts), to whichever of these host:port takes writes. */
  hosts?: string[];
  /** chunks: the 'sync-rows' task's chunk size. */
  chunkSize?: number;
}

export interface WorkerEvent {
  event: string;
  pid: number;
  [field: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * A Stampeded process of its own (test/fixtures/worker-process/main.mjs),
 * reporting what it does over IPC: so that a test can run a fleet, skew a
 * process's clock, and SIGKILL a process the way a crash would (no shutdown
 * hook runs, its connections just drop).
 */
export class WorkerProcess {
  readonly events: WorkerEvent[] = [];
  readonly exited: Promise<Exit>;
  private readonly listeners = new Set<() => void>();
  private tail = '';

  private constructor(readonly child: ChildProcess) {
    child.on('message', (event: WorkerEvent) => {
      this.events.push(event);
      for (const listener of this.listeners) listener();
    });
    const keep = (chunk: string) => (this.tail = (this.tail + chunk).slice(-20_000));
    child.stdout!.setEncoding('utf8').on('data', keep);
    child.stderr!.setEncoding('utf8').on('data', keep);
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    void this.exited.then(() => {
      for (const listener of this.listeners) listener();
    });
  }

  static start(config: WorkerProcessConfig): WorkerProcess {
    const { maxOldSpaceMb, ...sent } = config;
    const child = fork(MAIN, [], {
      // Not jest's --experimental-vm-modules: the fixture is plain ESM.
      execArgv: maxOldSpaceMb ? [`--max-old-space-size=${maxOldSpaceMb}`] : [],
      env: { ...process.env, NODE_OPTIONS: '', STAMPEDED_TEST_PROCESS: JSON.stringify(sent) },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    return new WorkerProcess(child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The worker's id in stampeded_workers, once the process is ready. */
  get workerId(): string | undefined {
    return this.events.find((e) => e.event === 'ready')?.workerId as string | undefined;
  }

  /** The tail of what the process wrote to stdout and stderr: its warnings and errors. */
  get output(): string {
    return this.tail;
  }

  /** The unhandled rejections and exceptions it reported (with `unhandled: 'report'`). */
  get unhandled(): string[] {
    return this.events.filter((e) => e.event === 'unhandled').map((e) => String(e.reason));
  }

  has(event: string, match: (e: WorkerEvent) => boolean = () => true): boolean {
    return this.events.some((e) => e.event === event && match(e));
  }

  count(event: string): number {
    return this.events.filter((e) => e.event === event).length;
  }

  /**
   * Resolves with the first event that matches, past or future; rejects at
   * the deadline or if the process exits first. The deadline is generous: a
   * Nest process takes seconds to boot on a CI machine busy with other suites.
   */
  waitFor(event: string, match: (e: WorkerEvent) => boolean = () => true, timeoutMs = 60_000): Promise<WorkerEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.find((e) => e.event === event && match(e));
        if (found) return done(() => resolve(found));
        if (!this.alive) done(() => reject(new Error(`process ${this.pid} exited before "${event}". Output:\n${this.tail}`)));
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`process ${this.pid}: no "${event}" within ${timeoutMs} ms. Output:\n${this.tail}`))),
        timeoutMs,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        settle();
      };
      this.listeners.add(check);
      check();
    });
  }

  /** Resolves once the app context is up and its worker registered. */
  ready(timeoutMs?: number): Promise<WorkerEvent> {
    return this.waitFor('ready', undefined, timeoutMs);
  }

  /** A message to the task set, which listens with process.on('message'). */
  send(message: Record<string, unknown>): void {
    this.child.send(message);
  }

  /** As a crash: no shutdown hooks, connections dropped by the kernel. */
  async kill(): Promise<Exit> {
    if (this.alive) this.child.kill('SIGKILL');
    return this.exited;
  }

  /** SIGTERM, as a deploy or a scale-down sends it; SIGKILL if it takes past `timeoutMs`. */
  async stop(timeoutMs = 15_000): Promise<Exit> {
    if (!this.alive) return this.exited;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }
}
