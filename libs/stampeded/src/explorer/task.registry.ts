import { isAbsolute } from 'node:path';
import { Injectable, type Type } from '@nestjs/common';
import {
  CHUNK_NOT_WITH,
  CHUNK_TASK_WITHOUT_HANDLE_CHUNK,
  DUPLICATE_TASK,
  HANDLE_CHUNK_WITHOUT_CHUNK,
  INVALID_ISOLATION,
  INVALID_OPTION,
  INVALID_RETRY_POLICY,
  PROCESS_FILE_REQUIRED,
  TASK_NAME_REQUIRED,
  TASK_OF_ANOTHER_INSTANCE,
  TASK_WITHOUT_HANDLE,
  UNKNOWN_OPTIONS,
} from '../stampeded.messages.js';
import { InvalidJobError, StampededConfigError } from '../errors/stampeded.errors.js';
import { DEFAULT_INSTANCE, DEFAULT_LOG_LIMITS, instanceNameOf, LIMITS, MIN_LOG_LINE_BYTES } from '../stampeded.constants.js';
import { taskMetadataOf, taskNameOf } from '../decorators/task-metadata.js';
import { describe, jobOptionsOf, validateJobOptions } from '../queue/job-input.validator.js';
import { JOB_OPTION_NAMES } from '../queue/job-columns.js';
import type { TaskHandler, TaskMetadata } from '../interfaces/task.interface.js';
import type { ChunkTaskHandler } from '../interfaces/chunk.interface.js';
import type { JobOptions } from '../interfaces/job-options.interface.js';
import type { RetryPolicy } from '../interfaces/retry-policy.interface.js';
import type { ChunkOptions } from '../interfaces/chunk.interface.js';
import { toArgsValidator, type ArgsValidator } from '../queue/args-validator.js';

export interface RegisteredTask {
  metadata: TaskMetadata;
  instance: TaskHandler<any> & ChunkTaskHandler<any>;
  className: string;
  classRef: Type<unknown>;
  /** The task's retryPolicy option as a policy object; undefined: the default. */
  retryPolicy?: RetryPolicy;
  /** The task's validate option; undefined: its args are not checked. */
  argsValidator?: ArgsValidator;
  /** Its logs option, the defaults filled in. */
  logLimits: LogLimits;
  /** What resolve() answers for it, made once. */
  resolved?: ResolvedTask;
  /** Its chunk option, with its default; undefined: its jobs run one handle() call each. */
  chunk?: Required<ChunkOptions>;
}

/** A task as enqueue sees it: see TaskRegistry.resolve(). */
export interface ResolvedTask {
  name: string;
  /** The job options its @Task() declares, over the queue's and the module's defaults; {} for a task this app knows only by name. */
  defaults: JobOptions;
  /** Its validate option; undefined: its args are not checked here. */
  argsValidator?: ArgsValidator;
  /** Its @Task() says `encrypt: true`. */
  encrypt?: boolean;
}

const TASK_OPTION_NAMES = [
  ...JOB_OPTION_NAMES,
  'name',
  'isolation',
  'processFile',
  'schedule',
  'retryPolicy',
  'storeResult',
  'logs',
  'validate',
  'ordering',
  'encrypt',
  'chunk',
  'instance',
] as const;

/** What a task keeps of its jobs' ctx.log() lines: its logs option, the defaults filled in. */
export type LogLimits = Required<NonNullable<TaskMetadata['logs']>>;

/** The most jobs a chunk holds: they are held in memory and recorded together. */
export const MAX_CHUNK_SIZE = 1000;

/** The tasks this app handles, by name. Filled once, at module init, by the explorer. */
@Injectable()
export class TaskRegistry {
  private readonly tasks = new Map<string, RegisteredTask>();
  /** The @Task classes enqueued here that this app does not provide, resolved once each. */
  private readonly unprovided = new WeakMap<Type<unknown>, ResolvedTask>();
  /** This registry's instance, and which instance of the app handles a task it does not: set once, by the explorer. */
  private instance = DEFAULT_INSTANCE;
  private ownerOf: (task: string) => string | undefined = () => undefined;

  /** Which instance this registry is, and how to find the instance of a task it does not handle (StampededInstances). */
  ownedBy(instance: string, ownerOf: (task: string) => string | undefined): void {
    this.instance = instance;
    this.ownerOf = ownerOf;
  }

  register(classRef: Type<unknown>, instance: unknown, metadata: TaskMetadata): void {
    const className = classRef.name;
    const where = `@Task('${metadata.name}') on ${className}`;
    if (typeof metadata.name !== 'string' || metadata.name.length === 0) {
      throw new StampededConfigError(TASK_NAME_REQUIRED(className));
    }
    validateJobOptions(where, metadata, TASK_OPTION_NAMES);
    if (metadata.isolation !== undefined && metadata.isolation !== 'none' && metadata.isolation !== 'process') {
      throw new StampededConfigError(INVALID_ISOLATION(where, metadata.isolation));
    }
    if (metadata.isolation === 'process' && !isModuleLocation(metadata.processFile)) {
      throw new StampededConfigError(PROCESS_FILE_REQUIRED(where, metadata.processFile));
    }
    for (const option of ['storeResult', 'encrypt'] as const) {
      if (metadata[option] !== undefined && typeof metadata[option] !== 'boolean') {
        throw new StampededConfigError(INVALID_OPTION(where, option, `must be true or false, got ${describe(metadata[option])}`));
      }
    }
    validateOrdering(where, metadata.ordering);
    const logLimits = toLogLimits(where, metadata.logs);
    const retryPolicy = toRetryPolicy(where, metadata.retryPolicy);
    const argsValidator = toArgsValidator(where, metadata.validate);
    const chunk = toChunk(where, metadata);
    const handles = (method: string) => typeof (instance as Record<string, unknown> | undefined)?.[method] === 'function';
    if (chunk && !handles('handleChunk')) throw new StampededConfigError(CHUNK_TASK_WITHOUT_HANDLE_CHUNK(className, metadata.name));
    if (!chunk && !handles('handle')) {
      throw new StampededConfigError((handles('handleChunk') ? HANDLE_CHUNK_WITHOUT_CHUNK : TASK_WITHOUT_HANDLE)(className, metadata.name));
    }
    const existing = this.tasks.get(metadata.name);
    if (existing && existing.classRef !== classRef) {
      throw new StampededConfigError(DUPLICATE_TASK(metadata.name, existing.className, className));
    }
    this.tasks.set(metadata.name, {
      metadata,
      instance: instance as RegisteredTask['instance'],
      className,
      classRef,
      retryPolicy,
      argsValidator,
      logLimits,
      chunk,
    });
  }

  get(name: string): RegisteredTask | undefined {
    return this.tasks.get(name);
  }

  names(): string[] {
    return [...this.tasks.keys()];
  }

  all(): RegisteredTask[] {
    return [...this.tasks.values()];
  }

  /**
   * The one answer to "which task is this, and what does it declare?" for
   * every call that takes a task by name or by class (enqueue, enqueueMany,
   * workflows and batches, the typed reads, schedules). A name or class this
   * app handles: its registered task. A @Task class this app does not
   * provide (an API process that enqueues for workers elsewhere): its
   * class's own options, checked here as discovery would check them, so
   * that its jobs land in its queue with its defaults and never silently in
   * the default queue. A name this app does not handle declares nothing:
   * its workers elsewhere check its args before it runs.
   */
  resolve(task: string | Type<unknown>): ResolvedTask {
    const name = taskNameOf(task);
    const registered = this.tasks.get(name);
    if (registered) {
      const { metadata, argsValidator } = registered;
      return (registered.resolved ??= { name, defaults: jobOptionsOf(metadata), argsValidator, encrypt: metadata.encrypt === true });
    }
    // A task another instance of this app handles would wait in this database for a worker that never comes.
    const owner = typeof task === 'string' ? this.ownerOf(name) : undefined;
    if (owner !== undefined && owner !== this.instance) throw new InvalidJobError(TASK_OF_ANOTHER_INSTANCE(name, owner, this.instance));
    if (typeof task === 'string') return { name, defaults: {} };
    let resolved = this.unprovided.get(task);
    if (!resolved) {
      const metadata = taskMetadataOf(task);
      const declared = instanceNameOf(metadata.instance);
      if (declared !== this.instance) throw new InvalidJobError(TASK_OF_ANOTHER_INSTANCE(name, declared, this.instance));
      const where = `@Task('${name}') on ${task.name}`;
      const defaults = validateJobOptions(where, jobOptionsOf(metadata));
      if (metadata.encrypt !== undefined && typeof metadata.encrypt !== 'boolean') {
        throw new StampededConfigError(INVALID_OPTION(where, 'encrypt', `must be true or false, got ${describe(metadata.encrypt)}`));
      }
      resolved = { name, defaults, argsValidator: toArgsValidator(where, metadata.validate), encrypt: metadata.encrypt === true };
      this.unprovided.set(task, resolved);
    }
    return resolved;
  }
}

/** The ordering option: { retryKeepsPlace?: boolean }, refused at bootstrap otherwise. */
function validateOrdering(where: string, option: TaskMetadata['ordering']): void {
  if (option === undefined) return;
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new StampededConfigError(INVALID_OPTION(where, 'ordering', `must be an object { retryKeepsPlace?: boolean }, got ${describe(option)}`));
  }
  const unknown = Object.keys(option).filter((k) => k !== 'retryKeepsPlace');
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`${where} ordering`, unknown, ['retryKeepsPlace']));
  if (option.retryKeepsPlace !== undefined && typeof option.retryKeepsPlace !== 'boolean') {
    throw new StampededConfigError(INVALID_OPTION(where, 'ordering.retryKeepsPlace', `must be true or false, got ${describe(option.retryKeepsPlace)}`));
  }
}

/** The logs option, { maxLines?, maxLineBytes? }, the defaults filled in; refused at bootstrap when out of range. */
function toLogLimits(where: string, option: TaskMetadata['logs']): LogLimits {
  if (option === undefined) return DEFAULT_LOG_LIMITS;
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new StampededConfigError(INVALID_OPTION(where, 'logs', `must be an object { maxLines?, maxLineBytes? }, got ${describe(option)}`));
  }
  const unknown = Object.keys(option).filter((k) => k !== 'maxLines' && k !== 'maxLineBytes');
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`${where} logs`, unknown, ['maxLines', 'maxLineBytes']));
  const whole = (name: 'maxLines' | 'maxLineBytes', min: number, max: number, unit: string): number => {
    const value = option[name] ?? DEFAULT_LOG_LIMITS[name];
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new StampededConfigError(INVALID_OPTION(where, `logs.${name}`, `must be a whole number of ${unit} from ${min} to ${max}, got ${describe(value)}`));
    }
    return value;
  };
  return {
    maxLines: whole('maxLines', 1, LIMITS.logLines, 'lines'),
    maxLineBytes: whole('maxLineBytes', MIN_LOG_LINE_BYTES, LIMITS.logLineBytes, 'bytes'),
  };
}

/**
 * The chunk option, its default filled in; refused at bootstrap when it is
 * not { size, waitMs? }, or beside an option a chunk cannot keep.
 */
function toChunk(where: string, metadata: TaskMetadata): Required<ChunkOptions> | undefined {
  const option = metadata.chunk;
  if (option === undefined) return undefined;
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new StampededConfigError(INVALID_OPTION(where, 'chunk', `must be an object { size, waitMs? }, got ${describe(option)}`));
  }
  const unknown = Object.keys(option).filter((k) => k !== 'size' && k !== 'waitMs');
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`${where} chunk`, unknown, ['size', 'waitMs']));
  const { size, waitMs = 0 } = option;
  if (!Number.isInteger(size) || size < 1 || size > MAX_CHUNK_SIZE) {
    throw new StampededConfigError(INVALID_OPTION(where, 'chunk.size', `must be a whole number from 1 to ${MAX_CHUNK_SIZE}, got ${describe(size)}`));
  }
  // setTimeout's own limit: a longer wait would fire at once.
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > 2_147_483_647) {
    throw new StampededConfigError(INVALID_OPTION(where, 'chunk.waitMs', `must be a whole number of milliseconds, 0 or more, got ${describe(waitMs)}`));
  }
  if (metadata.isolation === 'process') {
    throw new StampededConfigError(
      CHUNK_NOT_WITH(
        where,
        "isolation: 'process'",
        "a chunk's jobs share one handler call, so one child process would hold them all, a crash would fail every one of them, and their outcomes would have to cross the process boundary one by one; use isolation 'none' for a chunked task, or drop chunk to isolate each job",
      ),
    );
  }
  return { size, waitMs };
}

/** The retryPolicy option, a function or an object, as one shape; refused at bootstrap when it is neither. */
function toRetryPolicy(where: string, option: TaskMetadata['retryPolicy']): RetryPolicy | undefined {
  if (option === undefined) return undefined;
  if (typeof option === 'function') return { nextRetry: option };
  if (option !== null && typeof option === 'object' && typeof (option as { nextRetry?: unknown }).nextRetry === 'function') return option;
  throw new StampededConfigError(INVALID_RETRY_POLICY(where, option));
}

/** A URL, a file: URL string or an absolute path: what a child process can import whatever its working directory. */
function isModuleLocation(file: unknown): boolean {
  if (file instanceof URL) return true;
  return typeof file === 'string' && (file.startsWith('file:') || isAbsolute(file));
}
