import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface FleetEvent {
  event: string;
  pid: number;
  [field: string]: unknown;
}

export interface FleetProcessConfig {
  url: string;
  /** Merged into StampededModule.forRoot(). */
  stampeded?: Record<string, unknown>;
  /** The 'slow' task never finishes in this process. */
  hang?: boolean;
  /** This process's clock is off by this much. */
  skewMs?: number;
  /** Declare the every-second 'tick' schedule. */
  tick?: boolean;
}

const FIXTURE = fileURLToPath(new URL('../fixtures/stampeded-process.mjs', import.meta.url));

/**
 * A Stampeded process of its own (test/fixtures/stampeded-process.mjs), so a
 * test can SIGKILL it the way a crash would: no shutdown hook runs, its
 * connections just drop.
 */
export class FleetProcess {
  readonly events: FleetEvent[] = [];
  private readonly listeners = new Set<() => void>();
  private stderr = '';
  private readonly exited: Promise<void>;

  private constructor(readonly child: ChildProcess) {
    let buffer = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk;
      let newline: number;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        try {
          this.events.push(JSON.parse(line));
        } catch {
          continue;
        }
        for (const listener of this.listeners) listener();
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    this.exited.then(() => {
      for (const listener of this.listeners) listener();
    });
  }

  static start(config: FleetProcessConfig): FleetProcess {
    const child = spawn(process.execPath, [FIXTURE], {
      // Not jest's --experimental-vm-modules: the fixture is plain ESM.
      env: { ...process.env, NODE_OPTIONS: '', STAMPEDED_FIXTURE: JSON.stringify(config) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new FleetProcess(child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  has(event: string, match: (e: FleetEvent) => boolean = () => true): boolean {
    return this.events.some((e) => e.event === event && match(e));
  }

  /**
   * Resolves with the first event that matches, past or future; rejects at
   * the deadline or if the process exits first. The deadline is generous: a
   * Nest process takes seconds to boot on a CI machine busy with other suites.
   */
  waitFor(event: string, match: (e: FleetEvent) => boolean = () => true, timeoutMs = 60_000): Promise<FleetEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.find((e) => e.event === event && match(e));
        if (found) return done(() => resolve(found));
        if (!this.alive) done(() => reject(new Error(`process ${this.pid} exited before "${event}". stderr:\n${this.stderr}`)));
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`process ${this.pid}: no "${event}" within ${timeoutMs} ms. stderr:\n${this.stderr}`))),
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

  /** As a crash: no shutdown hooks, connections dropped by the kernel. */
  async kill(): Promise<void> {
    if (this.alive) this.child.kill('SIGKILL');
    await this.exited;
  }

  /** A clean shutdown (SIGTERM: app.close()), or a kill if it takes longer than 15 s. */
  async stop(): Promise<void> {
    if (!this.alive) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }
}
