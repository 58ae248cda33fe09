import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { StampededModule } from '@stampeded/nestjs';
import { DEMO_TASKS } from './tasks/demo.tasks.js';
import { DemoRunner } from './demo.runner.js';

@Module({
  imports: [
    // Read when the app boots, after main() has found or started PostgreSQL.
    TypeOrmModule.forRootAsync({ useFactory: () => ({ type: 'postgres', url: process.env.STAMPEDED_DEMO_URL }) }),
    StampededModule.forRoot({ migrations: 'auto', worker: { concurrency: 10, shutdownTimeoutMs: 5000 } }),
    StampededModule.registerQueue({ name: 'emails' }, { name: 'payments' }, { name: 'reports', concurrency: 2 }),
  ],
  providers: [...DEMO_TASKS, DemoRunner],
})
export class AppModule {}
