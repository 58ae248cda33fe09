import {
  Body,
  Get,
  Inject,
  Injectable,
  NotFoundException,
  Param,
  Post,
  Query,
  Redirect,
  Req,
  Res,
  UseFilters,
  UseGuards,
  Optional,
  applyDecorators,
  Header,
} from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { QueueControlService } from '@stampeded/nestjs';
import type { GateRefresher } from '../instances/root-instance.js';
import { DashboardAuthGuard } from '../auth/dashboard-auth.guard.js';
import { CsrfGuard, ensureCsrfCookie } from '../auth/csrf.guard.js';
import type { DashboardRequest } from '../auth/dashboard-request.js';
import { DASHBOARD_OPTIONS } from '../dashboard.constants.js';
import { BREAKER_NOT_FOUND, JOB_NOT_FOUND, WORKFLOW_NOT_FOUND, UNKNOWN_ACTION } from '../dashboard.messages.js';
import type { ResolvedDashboardOptions } from '../interfaces/dashboard-options.interface.js';
import { StampededInspector } from '../inspector/stampeded-inspector.js';
import { InstanceInspectors, instanceBase } from '../instances/instance-inspectors.js';
import { jobListQuery } from '../inspector/job-inspector.js';
import type { BulkFilters } from '../inspector/job-actions.js';
import { PAGE_SCRIPT_SOURCES, type PageContext } from '../views/layout.view.js';
import { bulkConfirmPage, errorsPage, jobPage, jobsPage, queuesPage, schedulesPage, workersPage, workflowsPage } from '../views/pages.view.js';
import { workflowPage } from '../views/workflow.view.js';
import { queuePage } from '../views/queue.view.js';
import { POLICY_FIELDS, policyFromInput } from '../inspector/queue-policy.js';
import { healthPage } from '../views/health.view.js';
import { insightsPage } from '../views/insights.view.js';
import { jobHistorySections } from '../views/job-history.view.js';
import { badSearchPage } from '../views/job-search.view.js';
import { InspectorInputError } from '../inspector/inspector-input.js';
import { InspectorErrorFilter } from './inspector-error.filter.js';
import { operatorOf, QUEUE_ACTIONS, runJobAction, SCHEDULE_ACTIONS } from './dashboard-api.controller.js';

/**
 * The policy allows one script, the live refresh, by its hash (and its
 * fetch of the page, by connect-src); frame-ancestors and X-Frame-Options
 * keep the action buttons from being clickjacked.
 */
const HtmlPage = () =>
  applyDecorators(
    Header('Content-Type', 'text/html; charset=utf-8'),
    Header('Cache-Control', 'no-store'),
    Header(
      'Content-Security-Policy',
      `default-src 'none'; script-src ${PAGE_SCRIPT_SOURCES}; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    ),
    Header('X-Frame-Options', 'DENY'),
    Header('Referrer-Policy', 'same-origin'),
  );

/** How long an action's redirect waits for the replica to show it; a replica further behind says its lag on the page. */
const AFTER_ACTION_CATCH_UP_MS = 2_000;

/** The web UI: server-rendered pages, and the form posts their buttons make. */
@Injectable()
@UseGuards(DashboardAuthGuard, CsrfGuard)
@UseFilters(InspectorErrorFilter)
export class DashboardPagesController {
  constructor(
    @Inject(StampededInspector) private readonly inspector: StampededInspector,
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(InstanceInspectors) private readonly instances: InstanceInspectors,
    @Optional() @Inject(QueueControlService) private readonly control?: GateRefresher | null,
  ) {}

  @Get()
  @HtmlPage()
  async queues(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse) {
    const [queues, throughput] = await Promise.all([this.inspector.queues(), this.inspector.throughput()]);
    return queuesPage({ ...(await this.context(request, response)), refreshSeconds: this.options.refreshSeconds }, queues, throughput);
  }

  @Get('queues/:queue')
  @HtmlPage()
  async queue(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse, @Param('queue') queue: string) {
    const [summary, breakers] = await Promise.all([this.inspector.queue(queue), this.inspector.breakers()]);
    return queuePage(await this.context(request, response), summary, breakers);
  }

  @Get('insights')
  @HtmlPage()
  async insights(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse, @Query() q: Record<string, string | undefined>) {
    const [ctx, insights] = await Promise.all([this.context(request, response), this.inspector.insights({ queue: q.queue, task: q.task, range: q.range })]);
    return insightsPage({ ...ctx, refreshSeconds: this.options.refreshSeconds }, insights);
  }

  @Get('jobs')
  @HtmlPage()
  async jobs(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse, @Query() q: Record<string, string | undefined>) {
    const filters = jobListQuery(q);
    const ctx = { ...(await this.context(request, response)), refreshSeconds: this.options.refreshSeconds };
    try {
      return jobsPage(ctx, filters, await this.inspector.jobs(filters));
    } catch (error) {
      // A search typed wrong is answered on the page, the form kept as typed.
      if (!(error instanceof InspectorInputError)) throw error;
      response.statusCode = 400;
      return badSearchPage({ ...ctx, refreshSeconds: 0 }, filters, error.message);
    }
  }

  @Get('jobs/:id')
  @HtmlPage()
  async job(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse, @Param('id') id: string, @Query('queue') queue?: string) {
    const found = await this.inspector.history(id, queue || undefined);
    if (!found) throw new NotFoundException(JOB_NOT_FOUND(id));
    const ctx = { ...(await this.context(request, response)), refreshSeconds: this.options.refreshSeconds };
    return jobPage(ctx, found.job, jobHistorySections(ctx, found));
  }

  /** A bulk action's confirmation: what it would change, counted now, and the button that does it. */
  @Get('bulk/:action')
  @HtmlPage()
  async bulkConfirm(
    @Req() request: DashboardRequest,
    @Res({ passthrough: true }) response: ServerResponse,
    @Param('action') action: string,
    @Query() q: Record<string, string | undefined>,
  ) {
    const filters = bulkFilters(q);
    const { matched, truncated } = await this.inspector.bulk(action, filters, { dryRun: true });
    return bulkConfirmPage(await this.context(request, response), action, { ...filters }, matched ?? 0, truncated);
  }

  @Post('actions/bulk/:action')
  @Redirect()
  async bulkAction(@Req() request: DashboardRequest, @Param('action') action: string, @Body() body: Record<string, unknown>) {
    await this.inspector.bulk(action, bulkFilters(body), { by: operatorOf(request) });
    return await this.back(body);
  }

  @Get('errors')
  @HtmlPage()
  async errors(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse, @Query('queue') queue?: string) {
    return errorsPage(await this.context(request, response), await this.inspector.errors({ queue: queue || undefined }));
  }

  @Get('workers')
  @HtmlPage()
  async workers(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse) {
    return workersPage(await this.context(request, response), await this.inspector.workers());
  }

  @Get('schedules')
  @HtmlPage()
  async schedules(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse) {
    return schedulesPage(await this.context(request, response), await this.inspector.schedules());
  }

  @Get('workflows')
  @HtmlPage()
  async workflows(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse, @Query('name') name?: string) {
    return workflowsPage(await this.context(request, response), await this.inspector.workflows({ name: name || undefined }));
  }

  @Get('workflows/:id')
  @HtmlPage()
  async workflow(
    @Req() request: DashboardRequest,
    @Res({ passthrough: true }) response: ServerResponse,
    @Param('id') id: string,
    @Query('view') view?: string,
  ) {
    const workflow = await this.inspector.workflow(id);
    if (!workflow) throw new NotFoundException(WORKFLOW_NOT_FOUND(id));
    return workflowPage(await this.context(request, response), workflow, view === 'tree' ? 'tree' : 'graph');
  }

  @Get('health')
  @HtmlPage()
  async health(@Req() request: DashboardRequest, @Res({ passthrough: true }) response: ServerResponse) {
    return healthPage(await this.context(request, response), await this.inspector.health());
  }

  @Post('actions/jobs/:id/:action')
  @Redirect()
  async jobAction(
    @Req() request: DashboardRequest,
    @Param('id') id: string,
    @Param('action') action: string,
    @Body() body: Record<string, unknown>,
    @Query('queue') queue?: string,
  ) {
    const result = await runJobAction(this.inspector, action, id, queue || undefined, operatorOf(request));
    if (!result) throw new NotFoundException(JOB_NOT_FOUND(id));
    return await this.back(body);
  }

  /**
   * The policy form. A value the core's validation refuses is answered on
   * the queue's page, with the message and the form as typed, and nothing
   * written; a saved policy goes back to the page it was saved from.
   */
  @Post('actions/queues/:queue/policy')
  @HtmlPage()
  async setPolicy(@Req() request: DashboardRequest, @Res() response: ServerResponse, @Param('queue') queue: string, @Body() body: Record<string, unknown>) {
    const typed = policyFromInput(body, POLICY_FIELDS);
    try {
      await this.inspector.setPolicy(queue, typed, operatorOf(request));
      await this.control?.refreshGates();
    } catch (error) {
      if (!(error instanceof InspectorInputError)) throw error;
      const [summary, breakers] = await Promise.all([this.inspector.queue(queue), this.inspector.breakers()]);
      const typedAsText = Object.fromEntries(POLICY_FIELDS.map((f) => [f, body?.[f]]));
      response.statusCode = 400;
      response.end(queuePage(await this.context(request, response), summary, breakers, { message: error.message, typed: typedAsText }));
      return;
    }
    response.statusCode = 303;
    response.setHeader('Location', (await this.back(body)).url);
    response.end();
  }

  @Post('actions/breakers/:destination/reset')
  @Redirect()
  async resetBreaker(@Req() request: DashboardRequest, @Param('destination') destination: string, @Body() body: Record<string, unknown>) {
    if (!(await this.inspector.closeBreaker(destination, operatorOf(request)))) throw new NotFoundException(BREAKER_NOT_FOUND(destination));
    await this.control?.refreshGates();
    return await this.back(body);
  }

  @Post('actions/queues/:queue/:action')
  @Redirect()
  async queueAction(@Req() request: DashboardRequest, @Param('queue') queue: string, @Param('action') action: string, @Body() body: Record<string, unknown>) {
    if (action === 'pause') await this.inspector.pauseQueue(queue, operatorOf(request), typeof body?.reason === 'string' ? body.reason : undefined);
    else if (action === 'resume') await this.inspector.resumeQueue(queue);
    else throw new NotFoundException(UNKNOWN_ACTION('queue', action, QUEUE_ACTIONS));
    await this.control?.refreshGates();
    return await this.back(body);
  }

  @Post('actions/schedules/:key/:action')
  @Redirect()
  async scheduleAction(@Param('key') key: string, @Param('action') action: string, @Body() body: Record<string, unknown>) {
    if (action === 'trigger') await this.inspector.triggerSchedule(key);
    else if (action === 'pause' || action === 'resume') await this.inspector.setSchedulePaused(key, action === 'pause');
    else throw new NotFoundException(UNKNOWN_ACTION('schedule', action, SCHEDULE_ACTIONS));
    return await this.back(body);
  }

  @Post('actions/workflows/:id/cancel')
  @Redirect()
  async cancelWorkflow(@Req() request: DashboardRequest, @Param('id') id: string, @Body() body: Record<string, unknown>) {
    if (!(await this.inspector.cancelWorkflow(id, `by ${operatorOf(request)}`))) throw new NotFoundException(WORKFLOW_NOT_FOUND(id));
    return await this.back(body);
  }

  @Post('actions/dlq/:queue/redrive')
  @Redirect()
  async redrive(@Param('queue') queue: string, @Body() body: Record<string, unknown>) {
    await this.inspector.redrive(queue, { task: typeof body?.task === 'string' && body.task ? body.task : undefined });
    return await this.back(body);
  }

  private async context(request: DashboardRequest, response: ServerResponse): Promise<PageContext> {
    const csrf = ensureCsrfCookie(request, response, this.options.path);
    const current = request.params?.instance ?? this.instances.root();
    const instances = { current, names: this.instances.names(), root: this.options.path };
    return { base: instanceBase(this.options.path, current), csrf, readOnly: this.options.readOnly, replica: await this.inspector.replica(), instances };
  }

  /**
   * Back to the page the button was on, never off the dashboard (an open
   * redirect is a phishing tool), once the replica that page reads shows
   * the action, or a moment passed: a page that read the job as it was
   * before the click would look like the click did nothing.
   */
  private async back(body: Record<string, unknown>): Promise<{ url: string; statusCode: number }> {
    await this.inspector.catchUp(AFTER_ACTION_CATCH_UP_MS);
    const base = this.options.path;
    const wanted = typeof body?._back === 'string' ? body._back : '';
    const safe = (wanted === base || wanted.startsWith(`${base}/`)) && !wanted.startsWith('//') && !/[\r\n\\]/.test(wanted);
    return { url: safe && wanted ? wanted : base || '/', statusCode: 303 };
  }
}

/** The jobs list's filters out of a query string or a form, empty ones left out. */
function bulkFilters(from: Record<string, unknown>): BulkFilters {
  const text = (key: string) => (typeof from?.[key] === 'string' && from[key] ? (from[key] as string) : undefined);
  return { queue: text('queue'), state: text('state'), task: text('task'), tenant: text('tenant'), destination: text('destination') };
}
