import type { ControlGate } from '../control/control.gate.js';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { Claimers, FairClaimer, LimitedClaimer, PlainClaimer } from './claimers.js';

/** What Claimers reads of queue control, as the fleet was last read. */
class ControlView {
  limitedQueues = new Set<string>();
  competing = false;
  private readonly listeners: (() => void)[] = [];
  limited = (queue: string) => this.limitedQueues.has(queue);
  tenantsCompete = () => this.competing;
  onRead = (listener: () => void) => this.listeners.push(listener);
  read(): void {
    for (const listener of this.listeners) listener();
  }
}

describe('Claimers', () => {
  // No claim runs here: the database is never reached.
  const db = {} as StampededDatabase;
  const claimAgain = { wake: () => {}, pollIntervalMs: 1000 };

  it('claims every queue with the plain claim without queue control', () => {
    const claimers = new Claimers(db, 'w', ['a', 'b'], undefined, () => 0, claimAgain);
    expect(claimers.of('a')).toBeInstanceOf(PlainClaimer);
    expect(claimers.of('b')).toBeInstanceOf(PlainClaimer);
    expect(claimers.tenantsCompete).toBe(false);
  });

  it('chooses once per read of the fleet: limited for a capped or rate-limited queue, fair while tenants compete, plain otherwise', () => {
    const view = new ControlView();
    view.limitedQueues.add('capped');
    const claimers = new Claimers(db, 'w', ['capped', 'open'], view as unknown as ControlGate, () => 0, claimAgain);
    expect(claimers.of('capped')).toBeInstanceOf(LimitedClaimer);
    expect(claimers.of('open')).toBeInstanceOf(PlainClaimer);

    // A change between reads is not seen until the next read.
    view.competing = true;
    view.limitedQueues.clear();
    expect(claimers.of('capped')).toBeInstanceOf(LimitedClaimer);
    expect(claimers.of('open')).toBeInstanceOf(PlainClaimer);
    view.read();
    expect(claimers.of('capped')).toBeInstanceOf(FairClaimer);
    expect(claimers.of('open')).toBeInstanceOf(FairClaimer);

    view.competing = false;
    view.read();
    expect(claimers.of('open')).toBeInstanceOf(PlainClaimer);
  });

  it('reads the cursor only in the plain claim', () => {
    const on = { db, workerId: 'w', control: new ControlView() as unknown as ControlGate, prefetch: () => 0 };
    expect(new PlainClaimer(db, 'w').cursored).toBe(true);
    expect(new FairClaimer(on).cursored).toBe(false);
    expect(new LimitedClaimer(on, claimAgain).cursored).toBe(false);
  });
});
