// The messages of several instances in one app, re-exported by stampeded.messages.ts: each says what was wrong and what to do.

export const INVALID_INSTANCE_NAME = (where: string, name: unknown) =>
  `${where}: name ${JSON.stringify(name)} is not an instance name. Use letters, digits, "_" and "-", at most 63 characters ` +
  `(name: 'billing'), or leave it out for the default instance.`;

export const DUPLICATE_INSTANCE = (name: string) =>
  `StampededModule.forRoot() declares the instance "${name}" twice. Each instance is one database's queue: import its forRoot() once, ` +
  `and give another database's instance another name.`;

export const UNKNOWN_INSTANCE = (what: string, name: string, known: readonly string[]) =>
  `${what} names the instance "${name}", which this app does not declare (it has ${known.length ? known.map((k) => `"${k}"`).join(', ') : 'none'}). ` +
  `Import StampededModule.forRoot({ name: '${name}', ... }), or name one of those.`;

export const NO_DEFAULT_INSTANCE = (what: string, known: readonly string[]) =>
  `${what} names no instance, so it belongs to the default one, but this app declares only ${known.map((k) => `"${k}"`).join(', ')}. ` +
  `Give it { instance: '<name>' }, or import StampededModule.forRoot() without a name for the default instance.`;

export const CLAIMED_BY_TWO_INSTANCES = (kind: 'task' | 'queue', name: string, first: string, second: string) =>
  `The ${kind} "${name}" belongs to two instances, "${first}" and "${second}": ` +
  (kind === 'task'
    ? `a task's jobs must live in one database, so that enqueue and its handler meet. Keep one @Task('${name}'), with { instance: '<name>' }, or rename one.`
    : `a queue lives in one database, so that @InjectQueue('${name}'), the dashboard and the CLI find it by name. ` +
      `Give its tasks and registerQueue() one instance, or rename the queue in one of them.`);

export const TASK_OF_ANOTHER_INSTANCE = (task: string, owner: string, here: string) =>
  `Task "${task}" belongs to the instance "${owner}", but was enqueued through the instance "${here}", whose workers do not run it. ` +
  `Enqueue it through ${owner === 'default' ? 'QueueService' : `@InjectQueueService('${owner}')`} instead.`;

const forRootOf = (instance: string) => (instance === 'default' ? 'StampededModule.forRoot()' : `StampededModule.forRoot({ name: '${instance}' })`);

export const WORKED_QUEUE_OF_ANOTHER_INSTANCE = (instance: string, queue: string, owner: string) =>
  `The worker.queues of the instance "${instance}" name the queue "${queue}", which belongs to the instance "${owner}" ` +
  `(its tasks or registerQueue() say so): its jobs are in that instance's database, where these workers never look. ` +
  `Take "${queue}" out of the worker.queues of ${forRootOf(instance)}; ` +
  `the workers of ${forRootOf(owner)} claim it (add it to their worker.queues if they list them).`;
