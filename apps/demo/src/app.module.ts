import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { StampededModule } from '@stampeded/nestjs';
import { StampededDashboardModule, StampededMetricsModule } from '@stampeded/dashboard';
import { DEMO_TASKS } from './tasks/demo.tasks.js';
import { DemoRunner } from './demo.runner.js';

/** The dashboard's demo password: STAMPEDED_DASHBOARD_PASSWORD, or `demo` on this local demo. */
export function demoPassword(): string {
  return process.env.STAMPEDED_DASHBOARD_PASSWORD ?? 'demo';
}

@Module({
  imports: [
    // Read when the app boots, after main() has found or started PostgreSQL.
    TypeOrmModule.forRootAsync({ useFactory: () => ({ type: 'postgres', url: process.env.STAMPEDED_DEMO_URL }) }),
    StampededModule.forRoot({ migrations: 'auto', worker: { concurrency: 10, shutdownTimeoutMs: 5000 } }),
    StampededModule.registerQueue({ name: 'emails' }, { name: 'payments' }, { name: 'reports', concurrency: 2 }),
    StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'demo', password: demoPassword() } }),
    StampededMetricsModule.forRoot({ path: '/metrics' }),
  ],
  providers: [...DEMO_TASKS, DemoRunner],
})
export class AppModule {}
