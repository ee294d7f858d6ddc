/**
 * End to end (issue 5's acceptance): with the proxy in front of the simulator (engine kind `sim`), the real pi CLI
 * (openai-completions API) completes a scripted two-step shell task: run a command, edit a file with a shell command,
 * say done. The file really changes on disk, and every completion is captured with logprobs that re-score exactly.
 * pi's API key is the session key; the proxy resolves it to the session and its task and forwards both to the
 * simulator (`x-polar-session`, `x-polar-task`), which picks the task's behaviour script.
 * Runs only in a loopback-only network namespace (`node scripts/test.mjs test/e2e/sim-pi.test.ts`).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { SimServer } from '../../src/sim/server.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { startTestProxy, type TestProxy } from '../support/proxy-harness.ts';

const PI = '@mariozechner/pi-coding-agent';
const SESSION = 'ps_e2e_pi_session';
const isolated = networkIsolated();
let sim: SimServer;
let proxy: TestProxy;
let root: string;

beforeAll(async () => {
  if (!isolated) return;
  root = mkdtempSync(join(tmpdir(), 'polar-sim-pi-'));
  sim = await SimServer.start({
    port: 0,
    prefillTps: 0,
    decodeTps: 0,
    scripts: {
      'e2e-edit': {
        variants: {
          solve: {
            weight: 1,
            steps: [
              { think: 'Let me look at the file first.', shell: 'cat target.txt' },
              { shell: "sed -i 's/old value/new value/' target.txt" },
              { say: 'Done: target.txt now says "new value".' },
            ],
          },
        },
      },
    },
  });
  proxy = await startTestProxy({
    engineUrl: sim.url,
    kind: 'sim',
    timeoutMs: 30_000,
    sessions: staticSessions({ [SESSION]: { session_id: SESSION, task_id: 'e2e-edit' } }),
    options: { keepaliveIntervalMs: 1000 },
  });
});
afterAll(async () => {
  await proxy?.stop();
  await sim?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

test.skipIf(!isolated)(`pi (openai-completions) edits a file through scripted shell calls, via the proxy, all calls captured ${NEEDS_ISOLATION}`, async () => {
  const bin = harnessBin(PI, HARNESS_CLIS[PI]!, 'pi');
  expect(bin).not.toBeNull();
  const work = join(root, 'work');
  const home = join(root, 'home');
  const agentDir = join(root, 'agent');
  for (const dir of [work, home, agentDir]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(work, 'target.txt'), 'the old value\n');
  writeFileSync(join(agentDir, 'models.json'), JSON.stringify({
    providers: {
      polar: {
        baseUrl: `${proxy.url}/v1`,
        api: 'openai-completions',
        apiKey: 'POLAR_API_KEY',
        compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
        models: [{ id: 'qwen3-sim', reasoning: false, contextWindow: 131072, maxTokens: 8192 }],
      },
    },
  }));
  const requestsBefore = sim.metrics().requests; // the proxy's engine probe already made one
  const proc = Bun.spawn([bin!, '-p', '--provider', 'polar', '--model', 'qwen3-sim', '--no-session', 'Replace "old value" with "new value" in target.txt'], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, PI_CODING_AGENT_DIR: agentDir, POLAR_API_KEY: SESSION, PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0' },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const timer = setTimeout(() => proc.kill(), 50_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  if (code !== 0) console.error(`pi exited ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
  expect(code).toBe(0);
  expect(readFileSync(join(work, 'target.txt'), 'utf8')).toBe('the new value\n');
  expect(stdout).toContain('new value');
  // Three model calls (cat, sed, final answer), all through the proxy and all captured in order.
  expect(sim.metrics().requests - requestsBefore).toBe(3);
  const records = proxy.store.completions.listBySession(SESSION);
  expect(records.map((r) => r.seq)).toEqual([0, 1, 2]);
  const commands = records.map((r) => r.ir_response?.toolCalls.map((c) => (JSON.parse(c.arguments) as { command: string }).command));
  expect(commands).toEqual([['cat target.txt'], ["sed -i 's/old value/new value/' target.txt"], []]);
  // Each later call carries the real output of the previous command back to the model.
  expect(JSON.stringify(records[1]!.ir_request.messages.filter((m) => m.role === 'tool'))).toContain('the old value');
  expect(records[2]!.ir_request.messages.filter((m) => m.role === 'tool').length).toBe(2);
  for (const rec of records) {
    expect(rec.dialect).toBe('openai-chat');
    expect(rec.engine_id).toBe(`sim@${sim.url}`);
    expect(rec.capture_error).toBeNull();
    expect(rec.prompt_ids.length).toBeGreaterThan(0);
    expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
  }
}, 60_000);
