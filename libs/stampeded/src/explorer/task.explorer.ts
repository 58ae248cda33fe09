import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { ON_JOB_EVENT_METADATA, STAMPEDED_OPTIONS, TASK_METADATA } from '../stampeded.constants.js';
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
  ) {}

  onModuleInit(): void {
    const wrappers = this.discovery.getProviders().filter((w) => w.isDependencyTreeStatic() && w.instance && w.metatype);
    for (const wrapper of wrappers) {
      const metadata = this.reflector.get<TaskMetadata | undefined>(TASK_METADATA, wrapper.metatype!);
      if (metadata) this.registry.register(wrapper.metatype as any, wrapper.instance, metadata);
      this.subscribeEventMethods(wrapper);
    }
    this.requireKeys();
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
      const meta = this.reflector.get<{ types: JobEventType[]; task?: string; queue?: string } | undefined>(ON_JOB_EVENT_METADATA, method);
      if (!meta) continue;
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
