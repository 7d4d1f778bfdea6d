// The web dashboard in a real browser (Chromium, headless) against an embedded cluster: log in, watch a
// running job's graph change to FINISHED without a reload, read pre-aggregated input for what it is and
// follow a vertex to its subtasks, see every TaskExecutor process with all its slots (and those idle in
// the warm pool), cancel a job from its page, read a failed job's exception, and never run what a job
// name or exception holds. Screenshots go to test/.tmp/dashboard-screenshots/.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterProcesses, waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const SHOTS = join(import.meta.dirname, '../.tmp/dashboard-screenshots');
const CHROMIUM_PATHS = [process.env['FLOE_CHROMIUM'], '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

function chromiumPath(): string {
  const found = CHROMIUM_PATHS.find((p): p is string => p !== undefined && p !== '' && existsSync(p));
  if (found === undefined)
    throw new Error(
      "no Chromium found (tried FLOE_CHROMIUM, /usr/bin/chromium, …): install it with 'apt-get install chromium', or run the tests with 'npm test', which installs it (test/prerequisites.sh)",
    );
  return found;
}

let cluster: TestCluster;
let browser: Browser;
let context: BrowserContext;
/** Uncaught errors in the page: the dashboard's own failures, whatever the API answered. */
const pageErrors: string[] = [];
/** alert(), confirm(), prompt(): none may open, least of all from a job's name or exception. */
const dialogs: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  cluster = await startTestCluster('dashboard', { 'heartbeat.interval': 300 });
  browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
}, 120_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await cluster?.close();
});

async function newPage(ctx: BrowserContext = context): Promise<Page> {
  const page = await ctx.newPage();
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return page;
}

const jobPage = (id: string): string => `${cluster.dispatcher.url}/#/jobs/${id}`;
const SLOTS_PER_TASK_EXECUTOR = 2;

/** The resource ids of the cluster's TaskExecutor processes alive now, as the operating system lists them. */
function taskExecutorProcesses(c: TestCluster): string[] {
  return clusterProcesses(c.stateDir)
    .map((p) => p.resourceId)
    .filter((id): id is string => id?.startsWith('te-') === true)
    .sort();
}

/** The TaskExecutor cards on the page: resource id, the "n of m slots in use" line, and whether it says idle. */
async function taskExecutorCards(page: Page): Promise<{ resourceId: string; slots: string; idle: boolean }[]> {
  const cards = page.locator('li.tm[data-resource-id]');
  const found: { resourceId: string; slots: string; idle: boolean }[] = [];
  for (let i = 0; i < (await cards.count()); i++) {
    const card = cards.nth(i);
    found.push({
      resourceId: (await card.getAttribute('data-resource-id'))!,
      slots: (await card.locator('[data-testid=slots-in-use]').textContent())!,
      idle: (await card.locator('[data-testid=idle]').count()) > 0,
    });
  }
  return found.sort((a, b) => a.resourceId.localeCompare(b.resourceId));
}

describe('the dashboard', () => {
  it('asks for the cluster secret, refuses a wrong one, and logs in with the right one', async () => {
    const page = await newPage();
    await page.goto(`${cluster.dispatcher.url}/`);
    const secret = page.getByLabel('Cluster secret');
    await secret.waitFor();
    await secret.fill('not the secret');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText(/not this cluster's secret/).waitFor();
    await secret.fill(cluster.dispatcher.secret);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.locator('[data-testid=count-running]').waitFor();
    await expect.poll(() => page.locator('main h1').textContent()).toBeTruthy();
    // The session is an HttpOnly cookie: the page's scripts cannot read it.
    expect(await page.evaluate('document.cookie')).toBe('');
    const cookies = await context.cookies();
    expect(cookies.find((c) => c.name === 'floe_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    await page.close();
  });

  it("shows a running job's graph, its tasks' states changing live until FINISHED, without a reload", async () => {
    const out = join(cluster.work, 'pipeline-out');
    const jobId = await cluster.submit('dashboard-jobs.ts', 'default', [out, '3000', '2'], 2);
    const page = await newPage();
    await page.goto(jobPage(jobId));
    const graph = page.locator('svg[data-testid=job-graph]');
    await graph.waitFor();
    await page.evaluate('window.loadedOnce = true');
    const { body: plan } = await cluster.api('GET', `/jobs/${jobId}/plan`);
    const vertices = plan.vertices as { id: string; name: string }[];
    expect(vertices.length).toBeGreaterThanOrEqual(2);
    for (const v of vertices) await expect.poll(() => graph.locator(`g[data-vertex-id="${v.id}"]`).textContent()).toContain(v.name);
    // The keyed exchange is drawn and labelled.
    await expect.poll(() => graph.locator('g[data-edge]').allTextContents()).toContainEqual(expect.stringMatching(/hash · pipelined/));
    await page.locator('g[data-vertex-id][data-state=RUNNING]').first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: join(SHOTS, 'job-running.png'), fullPage: true });
    await expect.poll(() => page.locator('[data-testid=job-status]').textContent(), { timeout: 60_000 }).toBe('FINISHED');
    for (const v of vertices) await expect.poll(() => graph.locator(`g[data-vertex-id="${v.id}"]`).getAttribute('data-state')).toBe('FINISHED');
    expect(await page.evaluate('window.loadedOnce')).toBe(true);
    await page.screenshot({ path: join(SHOTS, 'job-finished.png'), fullPage: true });
    // It does not checkpoint: no checkpoints on its page, and the API says why.
    expect(await page.locator('[data-testid=checkpoints]').count()).toBe(0);
    const noCheckpoints = await cluster.api('GET', `/jobs/${jobId}/checkpoints`);
    expect(noCheckpoints.status).toBe(404);
    expect(noCheckpoints.body.error.message).toMatch(/^Checkpointing is not enabled for job/);

    // The keyed sum takes pre-aggregated input: it receives one partial sum per key and producer subtask,
    // and says from how many records, which are the 3,000 its input emitted.
    const keyed = (plan.edges as { target: string; preAggregated?: boolean }[]).find((e) => e.preAggregated === true)?.target;
    expect(keyed, JSON.stringify(plan.edges)).toBeDefined();
    const { body: details } = await cluster.api('GET', `/jobs/${jobId}`);
    const counted = details.vertices as { id: string; parallelism: number; recordsIn: number; recordsOut: number }[];
    const sumVertex = counted.find((v) => v.id === keyed)!;
    expect(counted.filter((v) => v.id !== keyed && v.recordsOut > 0).map((v) => v.recordsOut)).toEqual([3000]);
    expect(sumVertex.recordsIn).toBeGreaterThan(0);
    expect(sumVertex.recordsIn).toBeLessThanOrEqual(10 * 2);
    const row = page.locator(`tr[data-vertex-id="${keyed}"]`);
    await expect.poll(() => row.locator('[data-testid=records-in]').textContent()).toBe(`${sumVertex.recordsIn} (pre-aggregated from 3,000)`);
    const node = graph.locator(`g[data-vertex-id="${keyed}"]`);
    await expect
      .poll(() => node.locator('text.graph-vertex-meta').allTextContents())
      .toEqual([expect.stringMatching(/^Parallelism 2/), `in ${sumVertex.recordsIn} · out ${sumVertex.recordsOut}`, 'in: pre-aggregated from 3,000']);
    // The vertex links to its subtasks: each one's attempt, shown and scrolled to.
    await row.getByRole('link').click();
    await expect.poll(() => page.url()).toContain(`?vertex=${keyed}`);
    const subtasks = page.locator(`details[data-vertex-id="${keyed}"]`);
    await expect.poll(() => subtasks.getAttribute('open')).not.toBeNull();
    await expect.poll(() => subtasks.locator('tbody tr').count()).toBe(sumVertex.parallelism);
    // Scrolled to: its top is within the 800-pixel-high viewport.
    await expect
      .poll(async () => {
        const box = await subtasks.boundingBox();
        return box !== null && box.y >= 0 && box.y < 800;
      })
      .toBe(true);

    await page.goto(`${cluster.dispatcher.url}/#/`);
    await expect.poll(() => page.locator('[data-testid=count-finished]').textContent()).toMatch(/[1-9]/);
    await page.screenshot({ path: join(SHOTS, 'overview.png'), fullPage: true });
    await page.goto(`${cluster.dispatcher.url}/#/jobs`);
    await page.getByRole('link', { name: 'dashboard pipeline' }).first().waitFor();
    await page.screenshot({ path: join(SHOTS, 'jobs.png'), fullPage: true });
    await page.close();
  });

  it('cancels a running job from its page after asking to confirm', async () => {
    // Three subtasks on TaskExecutors of two slots each: two processes, one with a slot free.
    const jobId = await cluster.submit('e2e-slow.ts', 'default', [join(cluster.work, 'slow-out')], 3);
    const page = await newPage();
    await page.goto(jobPage(jobId));
    await expect.poll(() => page.locator('[data-testid=job-status]').textContent(), { timeout: 30_000 }).toBe('RUNNING');
    await waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.tasks?.running === 3, 'the three subtasks running');
    await page.goto(`${cluster.dispatcher.url}/#/taskmanagers`);
    await page.getByText(/slow/).first().waitFor({ timeout: 30_000 });
    // Every TaskExecutor process of the cluster, each with all its slots, the busy ones as the job placed its subtasks.
    // (The last job's TaskExecutors may still be on their way out.)
    const processes = await waitFor(() => {
      const alive = taskExecutorProcesses(cluster);
      return alive.length === 2 && alive;
    }, 'two TaskExecutor processes');
    await expect.poll(() => taskExecutorCards(page).then((cards) => cards.map((c) => c.resourceId))).toEqual(processes);
    const slotLines = (await taskExecutorCards(page)).map((c) => c.slots).sort();
    expect(slotLines).toEqual([`1 of ${SLOTS_PER_TASK_EXECUTOR} slots in use`, `2 of ${SLOTS_PER_TASK_EXECUTOR} slots in use`]);
    await page.screenshot({ path: join(SHOTS, 'taskmanagers.png'), fullPage: true });
    await page.goto(`${cluster.dispatcher.url}/#/`);
    await expect.poll(() => page.locator('[data-testid=slots-in-use]').textContent()).toBe(`3 / ${processes.length * SLOTS_PER_TASK_EXECUTOR}`);
    await expect.poll(() => page.locator('[data-testid=task-executors]').textContent()).toBe(String(processes.length));
    await page.goto(jobPage(jobId));
    await page.getByRole('button', { name: 'Cancel job' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await page.screenshot({ path: join(SHOTS, 'cancel-dialog.png') });
    // Keeping it running changes nothing.
    await dialog.getByRole('button', { name: 'Keep running' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel job' }).click();
    await expect.poll(() => page.locator('[data-testid=job-status]').textContent(), { timeout: 30_000 }).toBe('CANCELED');
    expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('CANCELED');
    await page.close();
  });

  it("shows a checkpointing job's checkpoints live: counts, the latest completed with its size and duration, and the recent ones", async () => {
    const jobId = await cluster.submit('keyed-process.ts', 'eventTimers', ['6000', '1000'], 2, (graph) =>
      Object.assign(graph, { checkpointing: { intervalMs: 100 } }),
    );
    const page = await newPage();
    await page.goto(jobPage(jobId));
    const card = page.locator('[data-testid=checkpoints]');
    await card.waitFor({ timeout: 30_000 });
    await page.evaluate('window.loadedOnce = true');
    const completed = async (): Promise<number> => Number((await card.locator('[data-testid=checkpoints-completed]').textContent())?.replace(/\D/g, ''));
    await expect.poll(completed, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    const first = await completed();
    await expect.poll(completed, { timeout: 30_000 }).toBeGreaterThan(first);
    await expect.poll(() => card.locator('[data-testid=latest-completed-size]').textContent()).toMatch(/^[\d.]+ [KMG]?B$/);
    await expect.poll(() => card.locator('[data-testid=latest-completed-duration]').textContent()).toMatch(/^(\d+ ms|[\d.]+ s)$/);
    const rows = card.locator('[data-testid=checkpoint-history] tbody tr');
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(2);
    expect(await rows.count()).toBeLessThanOrEqual(10);
    const done = card.locator('[data-testid=checkpoint-history] tbody tr', { hasText: 'completed' }).first();
    expect(await done.locator('[data-testid=checkpoint-size]').textContent()).toMatch(/^[\d.]+ [KMG]?B$/);
    expect(await done.locator('[data-testid=checkpoint-duration]').textContent()).toMatch(/^(\d+ ms|[\d.]+ s)$/);
    // Newest first.
    const ids = (await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-checkpoint-id'))))) as number[];
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    await page.screenshot({ path: join(SHOTS, 'job-checkpoints.png'), fullPage: true });
    await expect.poll(() => page.locator('[data-testid=job-status]').textContent(), { timeout: 60_000 }).toBe('FINISHED');
    // What the page shows at the end is what the API has.
    const { body } = await cluster.api('GET', `/jobs/${jobId}/checkpoints`);
    await expect.poll(completed).toBe(body.counts.completed);
    expect(await page.evaluate('window.loadedOnce')).toBe(true);
    await page.close();
  });

  it("shows a streaming job's vertices live: records/s, the slow sink busy, its upstream backpressured, no watermark yet", async () => {
    const jobId = await cluster.submit('streaming-metrics.ts', 'slowSink', [], 1);
    const plan = await waitFor(async () => {
      const { status, body } = await cluster.api('GET', `/jobs/${jobId}/plan`);
      return status === 200 && (body as { vertices: { id: string }[] });
    }, 'the plan');
    const [source, sink] = plan.vertices.map((v) => v.id);
    const page = await newPage();
    await page.goto(jobPage(jobId));
    const share = (vertexId: string, testId: string) => async () =>
      parseInt((await page.locator(`tr[data-vertex-id="${vertexId}"] [data-testid=${testId}]`).textContent()) ?? '', 10);
    await expect.poll(share(source!, 'backpressured'), { timeout: 60_000 }).toBeGreaterThan(50);
    await expect.poll(share(sink!, 'busy'), { timeout: 60_000 }).toBeGreaterThan(50);
    await expect.poll(() => page.locator(`tr[data-vertex-id="${sink}"] [data-testid=rate-in]`).textContent()).toMatch(/^[0-9.,]+[kKM]?\/s$/);
    expect(await page.locator(`tr[data-vertex-id="${sink}"] [data-testid=watermark]`).textContent()).toBe('none');
    // Each subtask's own shares are listed with its attempt.
    const subtasks = page.locator(`details[data-vertex-id="${source}"] tbody tr`);
    await expect.poll(() => subtasks.count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'job-streaming.png'), fullPage: true });
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    await page.close();
  });

  it("shows a failed job's exception, and a job name and message made of HTML only as text", async () => {
    const name = '<img src=x onerror=alert(1)>';
    const jobId = await cluster.submit('dashboard-jobs.ts', 'hostile', [], 1);
    const page = await newPage();
    await page.goto(jobPage(jobId));
    await expect.poll(() => page.locator('[data-testid=job-status]').textContent(), { timeout: 60_000 }).toBe('FAILED');
    await expect.poll(() => page.locator('main h1').textContent()).toBe(name);
    const exceptions = page.locator('[data-testid=exceptions]');
    await expect.poll(() => exceptions.textContent(), { timeout: 10_000 }).toContain('<img src=x onerror=alert(1)> <script>alert(2)</script>');
    await page.screenshot({ path: join(SHOTS, 'job-failed.png'), fullPage: true });
    await page.goto(`${cluster.dispatcher.url}/#/jobs`);
    await page.getByRole('link', { name }).first().waitFor();
    expect(await page.locator('img[src="x"]').count()).toBe(0);

    // Keyboard: on a freshly loaded page the first Tab reaches the skip link; a column header sorts with Enter.
    const kb = await newPage();
    await kb.goto(`${cluster.dispatcher.url}/#/jobs`);
    await kb.getByRole('link', { name }).first().waitFor();
    await kb.keyboard.press('Tab');
    expect(await kb.evaluate('document.activeElement.textContent')).toMatch(/Skip to content/);
    const nameHeader = kb.getByRole('columnheader', { name: /Name/ });
    await nameHeader.getByRole('button').focus();
    await kb.keyboard.press('Enter');
    await expect.poll(() => nameHeader.getAttribute('aria-sort')).toBe('ascending');
    const names = (): Promise<string[]> => kb.locator('table tbody tr td:nth-child(2)').allTextContents();
    const shown = await names();
    expect(shown.length).toBeGreaterThanOrEqual(3);
    expect(shown).toEqual([...shown].sort((a, b) => a.localeCompare(b)));
    await kb.keyboard.press('Enter');
    await expect.poll(() => nameHeader.getAttribute('aria-sort')).toBe('descending');
    expect(await names()).toEqual([...shown].reverse());
    await kb.close();
    expect(await page.locator('main script').count()).toBe(0);
    expect(dialogs).toEqual([]);
    await page.close();
  });

  it('shows the TaskExecutors the warm pool keeps as idle, with all their slots', async () => {
    const warm = await startTestCluster('dashboard-warm', {
      'taskmanager.numberOfTaskSlots': 1,
      'cluster.warm-pool.jobmanagers': 1,
      'cluster.warm-pool.taskmanagers': 2,
      'cluster.warm-pool.idle-timeout': 120_000,
    });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const jobId = await warm.submit('dashboard-jobs.ts', 'default', [join(warm.work, 'warm-out'), '200', '0'], 2);
      expect((await warm.awaitTerminal(jobId)).status, await warm.exceptions(jobId)).toBe('FINISHED');
      await waitFor(async () => (await warm.api('GET', '/overview')).body.warmPool.readyJobManagers === 1, 'the JobManager ready in the warm pool');
      // Two TaskExecutor processes of one slot each stay alive, running nothing.
      const processes = taskExecutorProcesses(warm);
      expect(processes).toHaveLength(2);
      const page = await newPage(ctx);
      const { body: link } = await warm.api('POST', '/login-links');
      await page.goto(`${warm.dispatcher.url}${link.path}`);
      await page.locator('[data-testid=count-running]').waitFor();
      await expect.poll(() => page.locator('[data-testid=task-executors]').textContent()).toBe('2');
      await expect.poll(() => page.locator('[data-testid=task-executors-idle]').textContent()).toBe(', 2 idle in the warm pool');
      await expect.poll(() => page.locator('[data-testid=slots-in-use]').textContent()).toBe('0 / 2');
      await page.goto(`${warm.dispatcher.url}/#/taskmanagers`);
      await expect.poll(() => taskExecutorCards(page)).toEqual(processes.map((resourceId) => ({ resourceId, slots: '0 of 1 slots in use', idle: true })));
      await page.screenshot({ path: join(SHOTS, 'taskmanagers-warm.png'), fullPage: true });
    } finally {
      await ctx.close();
      await warm.close();
    }
  });

  it('shows a not-found page for an unknown job, and a used login link goes to the login', async () => {
    const page = await newPage();
    await page.goto(jobPage('no-such-job'));
    await page.locator('[data-testid=not-found]').waitFor();

    const fresh = await browser.newContext({ viewport: { width: 375, height: 812 }, colorScheme: 'dark' });
    try {
      const phone = await newPage(fresh);
      const { body: link } = await cluster.api('POST', '/login-links');
      await phone.goto(`${cluster.dispatcher.url}${link.path}`);
      await phone.locator('[data-testid=count-running]').waitFor();
      await phone.screenshot({ path: join(SHOTS, 'overview-phone-dark.png'), fullPage: true });
      const other = await browser.newContext();
      try {
        const again = await newPage(other);
        await again.goto(`${cluster.dispatcher.url}${link.path}`);
        await again.getByLabel('Cluster secret').waitFor();
        await again
          .getByText(/expired|used/i)
          .first()
          .waitFor();
      } finally {
        await other.close();
      }
    } finally {
      await fresh.close();
    }
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
