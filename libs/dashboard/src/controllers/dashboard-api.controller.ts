import {
  Body,
  ConflictException,
  Get,
  Header,
  HttpCode,
  Inject,
  Injectable,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  UseFilters,
  UseGuards,
  Optional,
} from '@nestjs/common';
import { QueueControlService } from '@stampeded/nestjs';
import type { GateRefresher } from '../instances/root-instance.js';
import { DashboardAuthGuard } from '../auth/dashboard-auth.guard.js';
import { CsrfGuard } from '../auth/csrf.guard.js';
import { cookieOf, type DashboardRequest } from '../auth/dashboard-request.js';
import { CSRF_COOKIE } from '../dashboard.constants.js';
import { BREAKER_NOT_FOUND, JOB_NOT_FOUND, NOT_ACTIONABLE, SCHEDULE_NOT_FOUND, WORKFLOW_NOT_FOUND, UNKNOWN_ACTION } from '../dashboard.messages.js';
import { policyFromInput } from '../inspector/queue-policy.js';
import { StampededInspector } from '../inspector/stampeded-inspector.js';
import { jobListQuery } from '../inspector/job-inspector.js';
import type { ActionResult } from '../inspector/job-actions.js';
import { InspectorErrorFilter } from './inspector-error.filter.js';

export type JobAction = 'retry' | 'run' | 'cancel' | 'discard';
const JOB_ACTIONS: readonly JobAction[] = ['retry', 'run', 'cancel', 'discard'];
export const QUEUE_ACTIONS = ['pause', 'resume', 'policy'] as const;
export const SCHEDULE_ACTIONS = ['pause', 'resume', 'trigger'] as const;

/** Runs one job action; null when there is no such job. Shared by the API and the pages' forms. */
export async function runJobAction(
  inspector: StampededInspector,
  action: string,
  id: string,
  queue: string | undefined,
  by: string,
): Promise<ActionResult | null> {
  if (!JOB_ACTIONS.includes(action as JobAction)) throw new NotFoundException(UNKNOWN_ACTION('job', action, JOB_ACTIONS));
  switch (action as JobAction) {
    case 'retry':
    case 'run':
      // One function does both: a finished-badly job gets a fresh budget, a waiting one runs now.
      return inspector.retry(id, queue);
    case 'cancel':
      return inspector.cancel(id, queue);
    case 'discard':
      return inspector.discard(id, queue, by);
  }
}

export function operatorOf(request: DashboardRequest): string {
  const header = request.headers.authorization;
  if (header?.startsWith('Basic ')) {
    const user = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':')[0];
    if (user) return `${user} (dashboard)`;
  }
  return 'the dashboard';
}

/**
 * The JSON API under `<path>/api`. Mounted at the configured path by
 * StampededDashboardModule.forRoot(), which subclasses it with the route.
 */
@Injectable()
@UseGuards(DashboardAuthGuard, CsrfGuard)
@UseFilters(InspectorErrorFilter)
export class DashboardApiController {
  constructor(
    @Inject(StampededInspector) private readonly inspector: StampededInspector,
    @Optional() @Inject(QueueControlService) private readonly control?: GateRefresher | null,
  ) {}

  /** The CSRF token to send as the x-stampeded-csrf header; the cookie it pairs with comes with this response. */
  @Get('csrf')
  @Header('Cache-Control', 'no-store')
  csrf(@Req() request: DashboardRequest) {
    return { token: cookieOf(request, CSRF_COOKIE) };
  }

  @Get('queues')
  @Header('Cache-Control', 'no-store')
  async queues() {
    const [queues, throughput] = await Promise.all([this.inspector.queues(), this.inspector.throughput()]);
    return { queues, throughput };
  }

  /** One queue: its counts, verdict, pause and policy, with who set them. */
  @Get('queues/:queue')
  @Header('Cache-Control', 'no-store')
  queue(@Param('queue') queue: string) {
    return this.inspector.queue(queue);
  }

  @Get('breakers')
  @Header('Cache-Control', 'no-store')
  breakers() {
    return this.inspector.breakers();
  }

  /** Closes a destination's breaker for the fleet, recording who did; its deferred jobs are due at once. */
  @Post('breakers/:destination/reset')
  @HttpCode(200)
  async resetBreaker(@Param('destination') destination: string, @Req() request: DashboardRequest) {
    const breaker = await this.inspector.closeBreaker(destination, operatorOf(request));
    if (!breaker) throw new NotFoundException(BREAKER_NOT_FOUND(destination));
    await this.control?.refreshGates();
    return breaker;
  }

  @Get('throughput')
  @Header('Cache-Control', 'no-store')
  throughput(@Query('minutes') minutes?: string) {
    return this.inspector.throughput({ minutes: minutes ? Math.min(Math.max(1, Number(minutes) || 60), 1440) : 60 });
  }

  /** Outcomes, waits and runs over time: ?queue=&task=&range=hour|day|week. */
  @Get('insights')
  @Header('Cache-Control', 'no-store')
  insights(@Query('queue') queue?: string, @Query('task') task?: string, @Query('range') range?: string) {
    return this.inspector.insights({ queue, task, range });
  }

  @Get('jobs')
  @Header('Cache-Control', 'no-store')
  jobs(@Query() q: Record<string, string | undefined>) {
    return this.inspector.jobs({
      ...jobListQuery(q),
      limit: q.limit ? Number(q.limit) || 50 : undefined,
    });
  }

  @Get('jobs/:id')
  @Header('Cache-Control', 'no-store')
  async job(@Param('id') id: string, @Query('queue') queue?: string) {
    const job = await this.inspector.job(id, queue);
    if (!job) throw new NotFoundException(JOB_NOT_FOUND(id));
    return job;
  }

  /** What happened to the job: `{ job, timeline: { enqueuedAt, until, spans, dueAt, state, forgotten }, related }`. */
  @Get('jobs/:id/history')
  @Header('Cache-Control', 'no-store')
  async history(@Param('id') id: string, @Query('queue') queue?: string) {
    const found = await this.inspector.history(id, queue || undefined);
    if (!found) throw new NotFoundException(JOB_NOT_FOUND(id));
    return found;
  }

  /**
   * Retries, cancels or discards the jobs matching the list's filters, in
   * bounded batches in SQL; `dryRun` answers how many it would change.
   */
  @Post('bulk/:action')
  @HttpCode(200)
  bulk(@Param('action') action: string, @Req() request: DashboardRequest, @Body() body?: Record<string, unknown>) {
    const text = (key: string) => (typeof body?.[key] === 'string' && body[key] ? (body[key] as string) : undefined);
    const whole = (key: string) => (body?.[key] === undefined || body[key] === '' ? undefined : Number(body[key]));
    return this.inspector.bulk(
      action,
      { queue: text('queue'), state: text('state'), task: text('task'), tenant: text('tenant'), destination: text('destination') },
      { dryRun: body?.dryRun === true || body?.dryRun === 'true', batchSize: whole('batchSize'), limit: whole('limit'), by: operatorOf(request) },
    );
  }

  @Post('jobs/:id/:action')
  @HttpCode(200)
  async jobAction(@Param('id') id: string, @Param('action') action: string, @Req() request: DashboardRequest, @Query('queue') queue?: string) {
    const result = await runJobAction(this.inspector, action, id, queue, operatorOf(request));
    if (!result) throw new NotFoundException(JOB_NOT_FOUND(id));
    if (!result.changed) throw new ConflictException(NOT_ACTIONABLE(action, id, result.state));
    return result;
  }

  @Get('errors')
  @Header('Cache-Control', 'no-store')
  errors(@Query('queue') queue?: string) {
    return this.inspector.errors({ queue });
  }

  @Get('workers')
  @Header('Cache-Control', 'no-store')
  workers() {
    return this.inspector.workers();
  }

  @Get('schedules')
  @Header('Cache-Control', 'no-store')
  schedules() {
    return this.inspector.schedules();
  }

  @Get('workflows')
  @Header('Cache-Control', 'no-store')
  workflows(@Query('name') name?: string, @Query('limit') limit?: string) {
    return this.inspector.workflows({ name: name || undefined, limit });
  }

  @Get('workflows/:id')
  @Header('Cache-Control', 'no-store')
  async workflow(@Param('id') id: string) {
    const workflow = await this.inspector.workflow(id);
    if (!workflow) throw new NotFoundException(WORKFLOW_NOT_FOUND(id));
    return workflow;
  }

  @Post('workflows/:id/cancel')
  @HttpCode(200)
  async cancelWorkflow(@Param('id') id: string, @Req() request: DashboardRequest, @Body() body?: { reason?: string }) {
    const by = `by ${operatorOf(request)}`;
    const result = await this.inspector.cancelWorkflow(id, typeof body?.reason === 'string' && body.reason ? `${body.reason}, ${by}` : by);
    if (!result) throw new NotFoundException(WORKFLOW_NOT_FOUND(id));
    return result;
  }

  @Post('schedules/:key/:action')
  @HttpCode(200)
  async scheduleAction(@Param('key') key: string, @Param('action') action: string) {
    if (action === 'trigger') {
      const job = await this.inspector.triggerSchedule(key);
      if (!job) throw new NotFoundException(SCHEDULE_NOT_FOUND(key));
      return { key, job };
    }
    if (action !== 'pause' && action !== 'resume') throw new NotFoundException(UNKNOWN_ACTION('schedule', action, SCHEDULE_ACTIONS));
    if (!(await this.inspector.setSchedulePaused(key, action === 'pause'))) throw new NotFoundException(SCHEDULE_NOT_FOUND(key));
    return { key, paused: action === 'pause' };
  }

  @Post('queues/:queue/:action')
  @HttpCode(200)
  async queueAction(@Param('queue') queue: string, @Param('action') action: string, @Req() request: DashboardRequest, @Body() body?: Record<string, unknown>) {
    let row: unknown;
    if (action === 'pause') row = await this.inspector.pauseQueue(queue, operatorOf(request), typeof body?.reason === 'string' ? body.reason : undefined);
    else if (action === 'resume') row = await this.inspector.resumeQueue(queue);
    // The whole policy, as setPolicy() takes it: a field left out is no limit.
    else if (action === 'policy') row = await this.inspector.setPolicy(queue, policyFromInput(body), operatorOf(request));
    else throw new NotFoundException(UNKNOWN_ACTION('queue', action, QUEUE_ACTIONS));
    await this.control?.refreshGates();
    return row;
  }

  @Post('dlq/:queue/redrive')
  @HttpCode(200)
  redrive(@Param('queue') queue: string, @Body() body?: { task?: string; fingerprint?: string; dryRun?: boolean | string }) {
    return this.inspector.redrive(queue, {
      task: body?.task || undefined,
      fingerprint: body?.fingerprint || undefined,
      dryRun: body?.dryRun === true || body?.dryRun === 'true',
    });
  }

  @Get('health')
  @Header('Cache-Control', 'no-store')
  health() {
    return this.inspector.health();
  }

  /**
   * How far behind the replica that the lists read is: `{ replica: {
   * readingFrom, caughtUp, lagSeconds, error? } }`, or `{ replica: null }`
   * when they read the primary by configuration.
   */
  @Get('replica')
  @Header('Cache-Control', 'no-store')
  async replica() {
    return { replica: await this.inspector.replica() };
  }
}
