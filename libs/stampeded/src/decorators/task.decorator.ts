import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import { TASK_METADATA } from '../stampeded.constants.js';
import type { TaskMetadata, TaskOptions } from '../interfaces/task.interface.js';

/** The module file that called @Task(), from the stack, for isolation 'process'. */
function callerModule(): string | undefined {
  const stack = new Error().stack?.split('\n') ?? [];
  for (const line of stack.slice(1)) {
    const match = line.match(/\((file:\/\/[^)]+?):\d+:\d+\)$/) ?? line.match(/at (file:\/\/\S+?):\d+:\d+$/);
    if (match && !match[1].includes('/decorators/task.decorator.') && !match[1].includes('/node_modules/')) return match[1];
  }
  return undefined;
}

/**
 * Marks a provider class as the handler of a task: its `handle(args, ctx)`
 * runs each job of that name. The options are the task's job defaults.
 *
 * @example
 * @Task('send-email', { queue: 'emails', maxAttempts: 5 })
 * export class SendEmail implements TaskHandler<{ to: string }> {
 *   async handle(args: { to: string }, ctx: JobContext) {}
 * }
 */
export function Task(name: string, options: TaskOptions = {}): ClassDecorator {
  const metadata: TaskMetadata = { ...options, name };
  if (options.isolation === 'process' && !options.processFile) metadata.declaredIn = callerModule();
  return applyDecorators(Injectable(), SetMetadata(TASK_METADATA, metadata));
}
