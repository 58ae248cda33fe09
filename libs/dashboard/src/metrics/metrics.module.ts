import { Controller, Get, Header, Inject, Module, Optional, Res, type DynamicModule, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { JobEvents } from '@stampeded/nestjs';
import { ReadDatabase } from '@stampeded/nestjs/internal';
import { StampededInstances } from '@stampeded/nestjs/internal-runtime';
import { StampededMetrics } from './stampeded-metrics.js';
import { NO_STAMPEDED } from '../dashboard.messages.js';

export interface StampededMetricsOptions {
  /** Where Prometheus scrapes. Default '/metrics'; `false` for no endpoint (use the registry yourself). */
  path?: string | false;
  /** A registry of your own to add Stampeded's metrics to. Default: a new one, shared with nothing. */
  registry?: Registry;
  /** Metric name prefix. Default 'stampeded_'. */
  prefix?: string;
}

const METRICS = Symbol('STAMPEDED_METRICS');

export const PROM_CLIENT_MISSING = () =>
  `StampededMetricsModule needs the prom-client package: npm install prom-client. (It is an optional peer dependency of @stampeded/dashboard.)`;

class MetricsLifecycle implements OnModuleInit, OnModuleDestroy {
  constructor(
    @Inject(METRICS) private readonly metrics: StampededMetrics,
    // Absent in an app that declares only named instances, whose events come through StampededInstances.
    @Optional() @Inject(JobEvents) private readonly events?: JobEvents,
    @Optional() @Inject(StampededInstances) private readonly instances?: StampededInstances,
  ) {}

  /** Every instance's events, each under its name: by module init, every instance of the app has been built. */
  onModuleInit(): void {
    if (!this.instances) return this.events && this.metrics.observe(this.events);
    for (const instance of this.instances.all()) this.metrics.observe(instance.events, instance.name);
  }

  onModuleDestroy(): void {
    this.metrics.stop();
  }
}

class MetricsController {
  constructor(@Inject(METRICS) private readonly metrics: StampededMetrics) {}

  @Get()
  @Header('Cache-Control', 'no-store')
  async scrape(@Res({ passthrough: true }) response: ServerResponse): Promise<string> {
    response.setHeader('Content-Type', this.metrics.registry.contentType);
    return this.metrics.registry.metrics();
  }
}

/**
 * Prometheus metrics for Stampeded, on an endpoint in the app's own HTTP
 * server. prom-client is loaded when the module starts, so that apps which
 * do not use metrics need not install it.
 */
@Module({})
export class StampededMetricsModule {
  static forRoot(options: StampededMetricsOptions = {}): DynamicModule {
    const path = options.path ?? '/metrics';
    const controllers = [];
    if (path !== false) {
      const mounted = class extends MetricsController {};
      Object.defineProperty(mounted, 'name', { value: 'StampededMetricsController' });
      Controller(path)(mounted);
      controllers.push(mounted);
    }
    return {
      module: StampededMetricsModule,
      controllers,
      providers: [
        {
          provide: METRICS,
          // The gauges read where the dashboard's lists do: the replica, when readConnection sets one.
          inject: [
            { token: ReadDatabase, optional: true },
            { token: StampededInstances, optional: true },
          ],
          useFactory: async (db?: ReadDatabase, instances?: StampededInstances) => {
            if (!db && !instances) throw new Error(NO_STAMPEDED('StampededMetricsModule'));
            let client: typeof import('prom-client');
            try {
              client = await import('prom-client');
            } catch {
              throw new Error(PROM_CLIENT_MISSING());
            }
            const registry = options.registry ?? new client.Registry();
            const sources = () => (instances ? instances.all().map((i) => ({ instance: i.name, db: i.reads })) : [{ instance: 'default', db: db! }]);
            return new StampededMetrics(client, registry, sources, options.prefix ?? 'stampeded_');
          },
        },
        MetricsLifecycle,
        { provide: StampededMetrics, useExisting: METRICS },
      ],
      exports: [StampededMetrics],
    };
  }
}
