import { applyDecorators, Injectable, SetMetadata, type Type } from '@nestjs/common';
import { TASK_METADATA } from '../stampeded.constants.js';
import type { ArgsOf, JobContext, RegisteredTaskName, TaskMetadata, TaskOptions } from '../interfaces/task.interface.js';
import type { ChunkContext, ChunkJob, ChunkOptions } from '../interfaces/chunk.interface.js';

/**
 * The classes @Task(name) may mark: for a name StampededTasks lists, one
 * whose handle() takes the args listed there, so that the registry and the
 * handler cannot drift apart; for any other name, any class (discovery
 * checks at startup that it has a handle()).
 */
export type TaskClassFor<Name extends string> = Name extends RegisteredTaskName
  ? Type<{ handle: (args: ArgsOf<Name>, ctx: JobContext) => unknown }>
  : abstract new (...args: any[]) => unknown;

/** The classes @Task(name, { chunk }) may mark: one with handleChunk(), of the listed args for a name StampededTasks lists. */
export type ChunkTaskClassFor<Name extends string> = Name extends RegisteredTaskName
  ? Type<{ handleChunk: (jobs: ChunkJob<ArgsOf<Name>>[], ctx: ChunkContext<any>) => unknown }>
  : Type<{ handleChunk: (jobs: ChunkJob<any>[], ctx: ChunkContext<any>) => unknown }>;

/** What @Task() returns: a class decorator, typed by the task's name. */
export type TaskDecorator<Name extends string> = <C extends TaskClassFor<Name>>(target: C) => void;

/** What @Task() with a chunk option returns: it marks a class with handleChunk(). */
export type ChunkTaskDecorator<Name extends string> = <C extends ChunkTaskClassFor<Name>>(target: C) => void;

/**
 * Marks a provider class as the handler of a task: its `handle(args, ctx)`
 * runs each job of that name. The options are the task's job defaults. With
 * `chunk`, its `handleChunk(jobs, ctx)` runs many jobs at once instead.
 *
 * @example
 * @Task('send-email', { queue: 'emails', maxAttempts: 5 })
 * export class SendEmail implements TaskHandler<{ to: string }> {
 *   async handle(args: { to: string }, ctx: JobContext) {}
 * }
 */
export function Task<Name extends string>(name: Name, options: TaskOptions & { chunk: ChunkOptions }): ChunkTaskDecorator<Name>;
export function Task<Name extends string>(name: Name, options?: TaskOptions): TaskDecorator<Name>;
export function Task<Name extends string>(name: Name, options: TaskOptions = {}): TaskDecorator<Name> | ChunkTaskDecorator<Name> {
  const metadata: TaskMetadata = { ...options, name };
  return applyDecorators(Injectable(), SetMetadata(TASK_METADATA, metadata));
}
