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
