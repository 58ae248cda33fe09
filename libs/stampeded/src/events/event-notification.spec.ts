import { fleetEvents, parseEventNotification } from './event-notification.js';

const W = '01a23c2a-3883-71fd-b85b-67948960f70e';
const A = '01a23c2a-3c1f-7003-bead-713a74a81c14';
const B = '01a23c2a-3c1f-7003-bead-713a74a81c15';

describe('event notifications', () => {
  it('reads what the completion statement writes, and expands it to one event per job', () => {
    const payload = `{"w" : "${W}", "t" : "completed", "q" : "emails", "k" : "send", "j" : [["${A}", 1], ["${B}", 3]]}`;
    const n = parseEventNotification(payload)!;
    expect(n).toEqual({
      workerId: W,
      outcome: 'completed',
      queue: 'emails',
      task: 'send',
      jobs: [
        [A, 1],
        [B, 3],
      ],
    });
    expect(fleetEvents(n)).toEqual([
      { origin: 'fleet', type: 'completed', jobId: A, queue: 'emails', task: 'send', attempt: 1, workerId: W },
      { origin: 'fleet', type: 'completed', jobId: B, queue: 'emails', task: 'send', attempt: 3, workerId: W },
    ]);
  });

  it('makes a failure failed, then retrying or discarded, as a local worker emits them', () => {
    const retrying = parseEventNotification(`{"w":"${W}","t":"retrying","q":"q","k":"t","j":[["${A}",2]],"f":"raised","d":1500,"l":false}`)!;
    expect(fleetEvents(retrying).map((e) => [e.type, e.attempt, e.failureKind, e.retryDelayMs, e.deadLettered])).toEqual([
      ['failed', 2, 'raised', undefined, undefined],
      ['retrying', 2, 'raised', 1500, undefined],
    ]);
    const discarded = parseEventNotification(`{"w":"${W}","t":"discarded","q":"q","k":"t","j":[["${A}",5]],"f":"unrecoverable","d":null,"l":true}`)!;
    expect(fleetEvents(discarded).map((e) => [e.type, e.deadLettered])).toEqual([
      ['failed', undefined],
      ['discarded', true],
    ]);
  });

  it("carries a running job's progress", () => {
    const n = parseEventNotification(`{"w" : "${W}", "t" : "progress", "q" : "q", "k" : "t", "j" : [["${A}", 2]], "p" : {"done" : 4, "total" : 10}}`)!;
    expect(fleetEvents(n)).toEqual([
      { origin: 'fleet', type: 'progress', jobId: A, queue: 'q', task: 't', attempt: 2, workerId: W, progress: { done: 4, total: 10 } },
    ]);
  });

  it('names jobs whose names were left out from what was read, and leaves out those it could not read', () => {
    const n = parseEventNotification(`{"w":null,"t":"cancelled","q":"q","k":null,"j":[["${A}",1],["${B}",1]]}`)!;
    expect(n.task).toBeNull();
    expect(fleetEvents(n)).toEqual([]);
    const names = new Map([[A, { queue: 'q', task: 'a very long name' }]]);
    expect(fleetEvents(n, names)).toEqual([{ origin: 'fleet', type: 'cancelled', jobId: A, queue: 'q', task: 'a very long name', attempt: 1, workerId: null }]);
  });

  it('ignores what is not one of its notifications', () => {
    for (const payload of ['', 'not json', 'null', '[]', '{"t":"exploded","j":[]}', '{"t":"completed"}']) {
      expect(parseEventNotification(payload)).toBeUndefined();
    }
    expect(parseEventNotification(`{"t":"completed","q":"q","k":"t","j":[["${A}",1],[42,"x"],"junk"]}`)!.jobs).toEqual([[A, 1]]);
  });
});
