import { Controller, Get, Header, Inject, Module, Res, type DynamicModule, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { JobEvents } from '@stampeded/nestjs';
import { ReadDatabase } from '@stampeded/nestjs/internal';
import { StampededMetrics } from './stampeded-metrics.js';

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
    @Inject(JobEvents) private readonly events: JobEvents,
  ) {}

  onModuleInit(): void {
    this.metrics.observe(this.events);
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
          inject: [ReadDatabase],
          useFactory: async (db: ReadDatabase) => {
            let client: typeof import('prom-client');
            try {
              client = await import('prom-client');
            } catch {
              throw new Error(PROM_CLIENT_MISSING());
            }
            const registry = options.registry ?? new client.Registry();
            return new StampededMetrics(client, registry, db, options.prefix ?? 'stampeded_');
          },
        },
        MetricsLifecycle,
        { provide: StampededMetrics, useExisting: METRICS },
      ],
      exports: [StampededMetrics],
    };
  }
}
