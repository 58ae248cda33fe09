import 'reflect-metadata';
import { Task } from '../decorators/task.decorator.js';
import { InvalidJobError, StampededConfigError } from '../errors/stampeded.errors.js';
import { TaskRegistry } from './task.registry.js';
import { taskMetadataOf } from '../decorators/task-metadata.js';

@Task('render-report', {
  queue: 'reports',
  maxAttempts: 7,
  backoff: { baseMs: 500 },
  storeResult: false,
  validate: (args) => ('pages' in (args as object) ? [] : ['pages is required']),
})
class RenderReport {
  handle() {}
}

@Task('misdeclared', { queue: 'bad queue name' })
class Misdeclared {
  handle() {}
}

class NotATask {
  handle() {}
}

describe('TaskRegistry.resolve', () => {
  it('answers a class this app does not provide from its own @Task(): its job options, not its other options', () => {
    const resolved = new TaskRegistry().resolve(RenderReport);
    expect(resolved.name).toBe('render-report');
    expect(resolved.defaults).toEqual({ queue: 'reports', maxAttempts: 7, backoff: { baseMs: 500 } });
    expect(resolved.argsValidator?.issues({})).toEqual(['pages is required']);
  });

  it('answers a provided task the same whether given by name or by class', () => {
    const registry = new TaskRegistry();
    registry.register(RenderReport, new RenderReport(), taskMetadataOf(RenderReport));
    expect(registry.resolve('render-report')).toBe(registry.resolve(RenderReport));
    expect(registry.resolve('render-report').defaults).toEqual({ queue: 'reports', maxAttempts: 7, backoff: { baseMs: 500 } });
  });

  it('declares nothing for a name this app does not handle', () => {
    expect(new TaskRegistry().resolve('elsewhere')).toEqual({ name: 'elsewhere', defaults: {} });
  });

  it('refuses a class whose @Task() options are invalid, naming it, and a class without @Task()', () => {
    const registry = new TaskRegistry();
    expect(() => registry.resolve(Misdeclared)).toThrow(InvalidJobError);
    expect(() => registry.resolve(Misdeclared)).toThrow(/^@Task\('misdeclared'\) on Misdeclared: queue must be/);
    expect(() => registry.resolve(NotATask)).toThrow(StampededConfigError);
    expect(() => registry.resolve(NotATask)).toThrow(/NotATask is not a task/);
  });
});

describe('TaskRegistry.register, chunked tasks', () => {
  const register = (classRef: new () => object, metadata: object) => () =>
    new TaskRegistry().register(classRef as never, new classRef(), { name: 'sync', ...metadata } as never);
  class Chunked {
    handleChunk() {}
  }
  class Single {
    handle() {}
  }

  it('takes a chunk option with handleChunk(), filling in its wait', () => {
    const registry = new TaskRegistry();
    registry.register(Chunked, new Chunked(), { name: 'sync', chunk: { size: 100 } });
    expect(registry.get('sync')?.chunk).toEqual({ size: 100, waitMs: 0 });
  });

  it('refuses a chunked task without handleChunk(), and handleChunk() without a chunk option, saying what to add', () => {
    expect(register(Single, { chunk: { size: 10 } })).toThrow(StampededConfigError);
    expect(register(Single, { chunk: { size: 10 } })).toThrow(/Single is marked @Task\('sync', \{ chunk \}\) but has no handleChunk\(jobs, ctx\)/);
    expect(register(Chunked, {})).toThrow(/Chunked has handleChunk\(\) but @Task\('sync'\) has no chunk option: add chunk: \{ size \}/);
  });

  it('refuses a chunk of a bad size or wait, or an unknown chunk option', () => {
    expect(register(Chunked, { chunk: { size: 0 } })).toThrow(/chunk\.size must be a whole number from 1 to 1000, got 0/);
    expect(register(Chunked, { chunk: { size: 1001 } })).toThrow(/chunk\.size must be a whole number from 1 to 1000/);
    expect(register(Chunked, { chunk: { size: 10, waitMs: -1 } })).toThrow(/chunk\.waitMs must be a whole number of milliseconds/);
    expect(register(Chunked, { chunk: { size: 10, wait: 5 } })).toThrow(/unknown option "wait"/);
    expect(register(Chunked, { chunk: 10 })).toThrow(/chunk must be an object \{ size, waitMs\? \}, got 10/);
  });

  it('refuses a chunk in a child process, saying why', () => {
    const isolated = register(Chunked, { chunk: { size: 10 }, isolation: 'process', processFile: '/srv/sync.process.js' });
    expect(isolated).toThrow(StampededConfigError);
    expect(isolated).toThrow(/chunk cannot be combined with isolation: 'process': a chunk's jobs share one handler call/);
  });
});
