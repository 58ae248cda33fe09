import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { DEFAULT_INSTANCE, DEFAULT_QUEUE, instanceNameOf, ON_JOB_EVENT_METADATA, STAMPEDED_OPTIONS, TASK_METADATA } from '../stampeded.constants.js';
import { StampededInstances } from '../instances/stampeded-instances.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { INVALID_OPTION, NO_DEFAULT_INSTANCE, UNKNOWN_INSTANCE } from '../stampeded.messages.js';
import type { TaskMetadata } from '../interfaces/task.interface.js';
import type { JobEventType } from '../interfaces/job-event.interface.js';
import { TaskRegistry } from './task.registry.js';
import { JobEvents } from '../events/job-events.js';
import { QueueRegistry } from '../queue/queue.registry.js';
import { JobEncryption } from '../encryption/job-encryption.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';

/**
 * Collects @Task providers into the registry and subscribes @OnJobEvent
 * methods, once, at module init: every provider is instantiated by then, and
 * nothing has run yet, so a bad declaration stops the app before it starts.
 * Each instance's explorer takes the tasks and methods that name its
 * instance (no name: the default one); every instance's handle exists by
 * then, so a name no instance answers to stops the app too.
 */
@Injectable()
export class TaskExplorer implements OnModuleInit {
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: TaskRegistry,
    private readonly events: JobEvents,
    private readonly queues: QueueRegistry,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
    private readonly instances: StampededInstances,
  ) {}

  private get instance(): string {
    return instanceNameOf(this.options.name);
  }

  onModuleInit(): void {
    const wrappers = this.discovery.getProviders().filter((w) => w.isDependencyTreeStatic() && w.instance && w.metatype);
    for (const wrapper of wrappers) {
      const metadata = this.reflector.get<TaskMetadata | undefined>(TASK_METADATA, wrapper.metatype!);
      if (metadata && this.isOurs(`@Task('${metadata.name}') on ${wrapper.metatype!.name}`, metadata.instance)) {
        this.registry.register(wrapper.metatype as any, wrapper.instance, metadata);
      }
      this.subscribeEventMethods(wrapper);
    }
    this.requireKeys();
    this.claimNames();
  }

  /** Whether a declaration that names `instance` belongs to this one; refuses a name no instance of the app answers to. */
  private isOurs(what: string, instance: unknown): boolean {
    if (instance !== undefined && (typeof instance !== 'string' || !instance)) {
      throw new StampededConfigError(INVALID_OPTION(what, 'instance', `must be an instance's name (forRoot's name), got ${JSON.stringify(instance)}`));
    }
    const owner = instanceNameOf(instance);
    if (!this.instances.has(owner)) {
      throw new StampededConfigError(
        owner === DEFAULT_INSTANCE ? NO_DEFAULT_INSTANCE(what, this.instances.names()) : UNKNOWN_INSTANCE(what, owner, this.instances.names()),
      );
    }
    return owner === this.instance;
  }

  /** Tells the app's other instances which tasks and queues are this one's: a name two of them hold is refused (StampededInstances.claim). */
  private claimNames(): void {
    const fallback = this.options.defaultJobOptions?.queue ?? DEFAULT_QUEUE;
    this.instances.claim(this.instance, 'task', this.registry.names());
    this.instances.claim(this.instance, 'queue', [...this.queues.names(), ...this.registry.all().map((task) => task.metadata.queue ?? fallback)]);
    this.registry.ownedBy(this.instance, (name) => this.instances.ownerOfTask(name));
  }

  /** A task or queue that asks for encryption in an app without keys would fail its first enqueue: it stops the start instead. */
  private requireKeys(): void {
    const encryption = new JobEncryption(this.options, this.queues);
    for (const task of this.registry.all()) if (task.metadata.encrypt) encryption.assertKeysFor(`@Task('${task.metadata.name}') on ${task.className}`);
    for (const name of this.queues.names())
      if (this.queues.get(name)?.encrypt) encryption.assertKeysFor(`StampededModule.registerQueue(${JSON.stringify(name)})`);
  }

  private subscribeEventMethods(wrapper: InstanceWrapper): void {
    const instance = wrapper.instance as Record<string, unknown>;
    const prototype = Object.getPrototypeOf(instance);
    if (!prototype) return;
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const method = instance[methodName];
      if (typeof method !== 'function') continue;
      const meta = this.reflector.get<{ types: JobEventType[]; task?: string; queue?: string; instance?: string } | undefined>(ON_JOB_EVENT_METADATA, method);
      if (!meta || !this.isOurs(`@OnJobEvent() on ${wrapper.name}.${methodName}`, meta.instance)) continue;
      this.events.subscribe(meta, async (event) => {
        try {
          await method.call(instance, event);
        } catch (err) {
          this.logger.error(`@OnJobEvent method ${wrapper.name}.${methodName} threw: ${(err as Error)?.message ?? err}`);
        }
      });
    }
  }
}
