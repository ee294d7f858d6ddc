/**
 * The live dashboard in a real headless browser: Debian's chromium (/usr/bin/chromium, or $POLAR_CHROMIUM) driven by
 * playwright-core loads `/` of a live `polar serve --with-sim` while a task runs, waits for the running task to appear,
 * checks what the page shows (tasks with rewards, the node and its stages, the engine, the error of a failing task),
 * opens a session page (tokens coloured by loss mask and logprob, messages beside them), and saves screenshots to
 * test-artifacts/dashboard.png and test-artifacts/session.png.
 */
import { expect, test } from 'bun:test';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

// Page functions run in the browser; this project's tsconfig has no DOM lib, so `document` is declared loosely here.
declare const document: { querySelector(s: string): { textContent: string | null } | null; querySelectorAll(s: string): Iterable<{ textContent: string | null }> };
import { REPO_ROOT, runPolar, SHELL_AGENT_COMMAND, SHELL_AGENT_RUNTIME_YAML, startPolar, useScratch } from '../support/polar-cli.ts';

const CHROMIUM = process.env.POLAR_CHROMIUM ?? '/usr/bin/chromium';
const ARTIFACTS = join(REPO_ROOT, 'test-artifacts');
const { dir: scratch, procs } = useScratch('polar-dashboard-');

async function submit(server: string, task: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${server}/rollout/task/submit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(task) });
  expect(res.status).toBe(200);
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  for (const until = Date.now() + ms; Date.now() < until; await Bun.sleep(100)) if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
}

const HAVE_CHROMIUM = existsSync(CHROMIUM);
const TITLE = HAVE_CHROMIUM ? 'dashboard in headless chromium during a running task' : `dashboard in headless chromium (skipped: no chromium at ${CHROMIUM}; .ci/run installs it)`;

test.skipIf(!HAVE_CHROMIUM)(TITLE, async () => {
  const scripts = join(scratch, 'scripts');
  mkdirSync(scripts);
  // The simulator finds a task's behaviour script by its task_id. Half the samples write ok (reward 1), half give up (0).
  // The draw hashes a random session id, so any mix can come out (all four give up one time in 16); the session page is
  // opened on `solved`, whose only variant writes ok, so the test never depends on the draw.
  const solve = '{shell: "echo ok > out.txt"}, {say: "done"}';
  writeFileSync(join(scripts, 'graded.yaml'), `variants:\n  solve: {weight: 1, steps: [${solve}]}\n  give_up: {weight: 1, steps: [{say: "I cannot do this."}]}\n`);
  writeFileSync(join(scripts, 'solved.yaml'), `variants:\n  solve: {weight: 1, steps: [${solve}]}\n`);
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, [
    `sim: {port: 0, scripts: ${scripts}}`, 'rollout: {port: 0}',
    `gateway: {heartbeat_interval_s: 0.5, nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`,
    `store: {path: ${join(scratch, 'polar.db')}}`, '',
  ].join('\n'));
  const { line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const server = line.match(/rollout server on (http:\/\/\S+?),/)?.[1]!;
  expect(server).toBeDefined();

  const base = { timeout_seconds: 120, builder: { strategy: 'prefix_merging' }, runtime: { kind: 'local' }, evaluator: { strategy: 'test_on_output', config: { command: 'grep -q ok out.txt' } } };
  const agent = { harness: 'shell', command: SHELL_AGENT_COMMAND, model_name: 'polar-sim' };
  await submit(server, { ...base, task_id: 'graded', instruction: 'Create out.txt containing ok.', num_samples: 4, agent, metadata: { policy_version: '1' } });
  await submit(server, { ...base, task_id: 'solved', instruction: 'Create out.txt containing ok.', num_samples: 1, agent, metadata: { policy_version: '1' } });
  await submit(server, { ...base, task_id: 'broken', instruction: 'Fail.', num_samples: 1, agent: { harness: 'shell', command: 'echo "no such tool" >&2; exit 3', model_name: 'polar-sim' } });
  const done = async (id: string) => ((await (await fetch(`${server}/rollout/task/${id}`)).json()) as { status: string }).status.toUpperCase() !== 'RUNNING';
  await waitFor('the first tasks to finish', async () => (await done('graded')) && (await done('solved')) && (await done('broken')));

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const consoleErrors: string[] = [];
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    await page.goto(`${server}/`);
    await page.waitForSelector('#conn.live', { timeout: 10_000 });
    await page.waitForSelector('tr[data-task="graded"]', { timeout: 10_000 });
    // The running task, submitted once the page listens: its agent sleeps, so it is still RUNNING while the page is checked.
    await submit(server, { ...base, task_id: 'slow-task', instruction: 'Wait.', num_samples: 2, agent: { harness: 'shell', command: 'sleep 60', model_name: 'polar-sim' }, metadata: { policy_version: '2' } });
    await page.waitForSelector('tr[data-task="slow-task"][data-status="RUNNING"]', { timeout: 30_000 });
    await page.waitForFunction(() => [...document.querySelectorAll('#events li')].some((li) => li.textContent?.includes('slow-task')), undefined, { timeout: 10_000 });
    // Both sessions of the running task reach RUNNING on the node (its stages show it, fed by heartbeats and events).
    await page.waitForFunction(() => document.querySelector('tr[data-node="box-0"]')?.textContent?.includes('running 2'), undefined, { timeout: 30_000 });

    const graded = await page.locator('tr[data-task="graded"]').innerText();
    expect(graded).toContain('COMPLETED');
    expect(graded).toContain('4 / 4 finished');
    const chips = await page.locator('tr[data-task="graded"] a.chip').allInnerTexts();
    expect(chips).toHaveLength(4);
    for (const c of chips) expect(['0', '1']).toContain(c);
    const passes = chips.filter((c) => c === '1').length;
    expect(graded).toContain(`${Math.round((passes / 4) * 100)}%`);
    expect(await page.locator('tr[data-task="slow-task"]').innerText()).toContain('0 / 2 finished');
    expect(await page.locator('tr[data-node="box-0"]').innerText()).toContain('healthy');
    expect(await page.locator('#k-engine').innerText()).toBe('up');
    // Both slow-task sessions are on the node: none waits on the server, and the node's queue is named as the node's.
    expect(await page.locator('#k-running-sub').innerText()).toMatch(/^0 waiting for a node · \d+ queued on nodes · \d+ init · \d+ ready · \d+ postrun$/);
    expect(await page.locator('#errors').innerText()).toContain('broken #0');
    // pass@1 per policy_version: one point for version 1 (graded and solved, the finished tasks that declared one) and one for none.
    expect(await page.locator('#policy svg circle').count()).toBe(4);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });

    // The session page of a passing sample: sampled tokens (loss_mask 1) coloured by logprob, messages beside them.
    expect(await page.locator('tr[data-task="solved"] a.chip').allInnerTexts()).toEqual(['1']);
    await page.locator('tr[data-task="solved"] a.chip').click();
    await page.waitForSelector('#session:not([hidden]) .tok.m1', { timeout: 10_000 });
    const sampled = await page.locator('.tok.m1').count();
    const template = await page.locator('.tok.m0').count();
    expect(sampled).toBeGreaterThan(0);
    expect(template).toBeGreaterThan(0);
    expect(await page.locator('.tok.m1').first().getAttribute('title')).toMatch(/loss_mask 1 · logprob -?\d/);
    expect(await page.locator('#s-messages').innerText()).toContain('echo ok > out.txt');
    expect(await page.locator('#s-head').innerText()).toContain('reward 1.00');
    await page.screenshot({ path: join(ARTIFACTS, 'session.png'), fullPage: true });

    // `polar trace show --html` writes the same view as a file that works without the server, with decoded tokens.
    const html = join(scratch, 'session.html');
    const written = await runPolar(['trace', 'show', '--db', join(scratch, 'polar.db'), '--task', 'broken', '--html', html]);
    expect(written.code).toBe(0);
    const shown = await runPolar(['trace', 'show', '--db', join(scratch, 'polar.db'), '--task', 'graded', '--sample', '0', '--html', html]);
    expect(shown.code).toBe(0);
    await page.goto(`file://${html}`);
    await page.waitForSelector('#session:not([hidden]) .tok.m1', { timeout: 10_000 });
    expect(await page.locator('#conn').innerText()).toBe('offline copy');
    expect(await page.locator('#home').isHidden()).toBe(true);
    const text = (await page.locator('.tokens').first().innerText()).replace(/\s+/g, '');
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toMatch(/^\d+$/); // decoded text, not ids
    await page.screenshot({ path: join(ARTIFACTS, 'session-offline.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  } finally {
    await browser.close();
  }
}, 180_000);

test.skipIf(!HAVE_CHROMIUM)('dashboard behind a control-plane token: a 401 says to open it with ?token=… and stops retrying', async () => {
  const { RolloutServer } = await import('../../src/rollout/server.ts');
  const { openStore } = await import('../../src/store/index.ts');
  const store = openStore(':memory:');
  const server = new RolloutServer({ store, controlPlaneToken: 'tok', tickMs: 60_000 }).start();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    let refused = 0;
    page.on('response', (r) => { if (r.status() === 401) refused++; });
    await page.goto(`${server.url}/`);
    await page.waitForFunction(() => document.querySelector('#updated')?.textContent?.includes('?token=<control-plane token>'), undefined, { timeout: 10_000 });
    expect(await page.textContent('#updated')).toBe('this server needs its control-plane token: open the dashboard as /?token=<control-plane token>');
    expect(await page.textContent('#conn')).toBe('HTTP 401: token needed');
    const after = refused;
    await Bun.sleep(6_000); // past the 5 s poll and the 2 s reconnect
    expect(refused).toBe(after);
    await page.goto(`${server.url}/?token=tok`);
    await page.waitForSelector('#conn.live', { timeout: 10_000 });
  } finally {
    await browser.close();
    await server.stop();
    store.close();
  }
}, 60_000);
