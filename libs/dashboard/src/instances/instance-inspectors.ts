import { Inject, Injectable, NotFoundException, Optional, Scope, type Provider, type Type } from '@nestjs/common';
import { REQUEST } from '@nestjs/core';
import { DEFAULT_INSTANCE } from '@stampeded/nestjs/internal';
import { StampededInstances } from '@stampeded/nestjs/internal-runtime';
import { QueueControlService } from '@stampeded/nestjs';
import { StampededInspector } from '../inspector/stampeded-inspector.js';
import { UNKNOWN_DASHBOARD_INSTANCE } from '../dashboard.messages.js';
import { rootInstance, rootInstanceControl } from './root-instance.js';

export { INSTANCES_SEGMENT, instanceBase } from './instance-base.js';

/** The inspector of the instance a request's URL names, for the controllers mounted under `<path>/instances/:instance`. */
export const INSTANCE_INSPECTOR = Symbol('INSTANCE_INSPECTOR');
/** That instance's QueueControlService, whose gates an action on a policy or a breaker refreshes. */
export const INSTANCE_CONTROL = Symbol('INSTANCE_CONTROL');
/** The QueueControlService of the instance the dashboard's own path serves (rootInstance()). */
export const ROOT_CONTROL = Symbol('ROOT_CONTROL');

/** One inspector per instance of the app, made on first use; the default instance's is the one the module provides. */
@Injectable()
export class InstanceInspectors {
  private readonly made = new Map<string, StampededInspector>();

  constructor(
    @Inject(StampededInspector) private readonly main: StampededInspector,
    @Optional() @Inject(StampededInstances) private readonly instances?: StampededInstances,
  ) {}

  /** The app's instances, the default first: the dashboard's switcher. */
  names(): string[] {
    return this.instances?.names() ?? [DEFAULT_INSTANCE];
  }

  /** The instance the dashboard's own path serves: the default one, or the first named one in an app without it. */
  root(): string {
    return rootInstance(this.instances);
  }

  /** An instance's QueueControlService; undefined for an instance the app does not have. */
  control(name: string): QueueControlService | undefined {
    return this.instances?.get(name)?.control;
  }

  get(name: string): StampededInspector | undefined {
    if (name === DEFAULT_INSTANCE && this.root() === DEFAULT_INSTANCE) return this.main;
    const instance = this.instances?.get(name);
    if (!instance) return undefined;
    let inspector = this.made.get(name);
    if (!inspector) {
      inspector = new StampededInspector(instance.database, instance.reads.replicated ? instance.reads : undefined);
      this.made.set(name, inspector);
    }
    return inspector;
  }
}

export const instanceInspectorProviders: Provider[] = [
  InstanceInspectors,
  {
    provide: INSTANCE_INSPECTOR,
    scope: Scope.REQUEST,
    inject: [REQUEST, InstanceInspectors],
    useFactory: (request: { params?: Record<string, string> }, inspectors: InstanceInspectors) => {
      const name = request.params?.instance ?? DEFAULT_INSTANCE;
      const inspector = inspectors.get(name);
      if (!inspector) throw new NotFoundException(UNKNOWN_DASHBOARD_INSTANCE(name, inspectors.names()));
      return inspector;
    },
  },
  {
    provide: INSTANCE_CONTROL,
    scope: Scope.REQUEST,
    inject: [REQUEST, InstanceInspectors],
    useFactory: (request: { params?: Record<string, string> }, inspectors: InstanceInspectors) =>
      inspectors.control(request.params?.instance ?? DEFAULT_INSTANCE),
  },
  {
    provide: ROOT_CONTROL,
    inject: [
      { token: QueueControlService, optional: true },
      { token: StampededInstances, optional: true },
    ],
    useFactory: (control?: QueueControlService, instances?: StampededInstances) => control ?? (instances ? rootInstanceControl(instances) : null),
  },
];

/** The controller `mounted` at the dashboard's own path, with the QueueControlService of the instance it serves at `controlIndex`. */
export function forRootInstance<T extends Type<object>>(mounted: T, controlIndex: number): T {
  Inject(ROOT_CONTROL)(mounted, undefined as never, controlIndex);
  return mounted;
}

/**
 * The controller `mounted` (already given its route under
 * `<path>/instances/:instance`) with the inspector of the instance its
 * request names in place of the default one (its first constructor
 * argument), and that instance's QueueControlService (at `controlIndex`). Request-scoped through that provider, so only these routes pay
 * for a controller per request.
 */
export function forInstances<T extends Type<object>>(mounted: T, controlIndex: number): T {
  Inject(INSTANCE_INSPECTOR)(mounted, undefined as never, 0);
  Inject(INSTANCE_CONTROL)(mounted, undefined as never, controlIndex);
  return mounted;
}
