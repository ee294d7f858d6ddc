/**
 * End to end: the real pi CLI (openai-completions API) drives a scripted two-step shell task against the simulator's
 * vLLM-compatible /v1: run a command, edit a file with a shell command, say done; the file really changes on disk.
 * The proxy will later sit in between; here pi sends the session/task headers itself (models.json `headers`).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimServer } from '../../src/sim/server.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const PI = '@mariozechner/pi-coding-agent';
let sim: SimServer;
let root: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'polar-sim-pi-'));
  sim = await SimServer.start({
    port: 0,
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
});
afterAll(async () => {
  await sim?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

test.skipIf(!networkIsolated())(`pi (openai-completions) edits a file through scripted shell calls ${NEEDS_ISOLATION}`, async () => {
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
        baseUrl: `${sim.url}/v1`,
        api: 'openai-completions',
        apiKey: 'POLAR_API_KEY',
        headers: { 'x-polar-session': 'ps_e2e_pi_session', 'x-polar-task': 'e2e-edit' },
        compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
        models: [{ id: 'qwen3-sim', reasoning: false, contextWindow: 131072, maxTokens: 8192 }],
      },
    },
  }));
  const proc = Bun.spawn([bin!, '-p', '--provider', 'polar', '--model', 'qwen3-sim', '--no-session', 'Replace "old value" with "new value" in target.txt'], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, PI_CODING_AGENT_DIR: agentDir, POLAR_API_KEY: 'ps_e2e_pi_session', PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0' },
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
  // Three model calls: cat, sed, final answer.
  expect(sim.metrics().requests).toBe(3);
}, 60_000);
