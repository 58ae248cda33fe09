import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const FIXTURE = fileURLToPath(new URL('../fixtures/control-process.mjs', import.meta.url));

export interface ControlProcessConfig {
  url: string;
  stampeded?: Record<string, unknown>;
  queues?: Record<string, unknown>[];
  /** While this file exists, the 'call' task's destination is down. */
  downFile?: string;
}

/** A worker process of test/fixtures/control-process.mjs, reporting JSON lines. */
export class ControlProcess {
  private readonly lines: Record<string, unknown>[] = [];
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
          this.lines.push(JSON.parse(line));
        } catch {
          continue;
        }
        for (const listener of this.listeners) listener();
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr = (this.stderr + chunk).slice(-4000)));
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    void this.exited.then(() => this.listeners.forEach((l) => l()));
  }

  static start(config: ControlProcessConfig): ControlProcess {
    const child = spawn(process.execPath, [FIXTURE], {
      env: { ...process.env, NODE_OPTIONS: '', STAMPEDED_CONTROL_FIXTURE: JSON.stringify(config) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new ControlProcess(child);
  }

  /** The tail of the process's stderr: its warnings. */
  get warnings(): string {
    return this.stderr;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  count(event: string): number {
    return this.lines.filter((l) => l.event === event).length;
  }

  /** The first line with this event, past or future; rejects at the deadline or when the process exits first. */
  waitFor(event: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.find((l) => l.event === event);
        if (found) return done(() => resolve(found));
        if (!this.alive) done(() => reject(new Error(`control process exited before "${event}". stderr:\n${this.stderr}`)));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`no "${event}" within ${timeoutMs} ms. stderr:\n${this.stderr}`))), timeoutMs);
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        settle();
      };
      this.listeners.add(check);
      check();
    });
  }

  async stop(): Promise<void> {
    if (!this.alive) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }
}
