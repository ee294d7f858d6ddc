/**
 * `polar run` with the CLIs added after the first six (Cline, Continue, Kilo Code) and the `custom` harness, each on
 * one example task with one sample, in chat and in token mode, against the in-process simulator: the session ends
 * COMPLETED with the CLI's own result saying success, the model's tool calls really ran (a later call carries a tool
 * result), and `polar trace verify` finds every sampled token with its logprob. The full matrix (every task, several
 * samples) is scripts/harness-matrix.sh. The token-mode runs of the three CLIs have no `node` or `npm` on PATH (the
 * JavaScript ones then run on polar's own Bun; run-without-node.test.ts covers the other harnesses). Runs only inside a
 * loopback-only network namespace (`npm test`).
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { getHarnessAdapter } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths } from '../../src/gateway/harnesses/install.ts';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { openStore } from '../../src/store/index.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { SHELL_AGENT_RUN_FLAGS } from '../support/polar-cli.ts';
import { expectCompletedToolLoop } from '../support/run-checks.ts';
import { pathWithoutNode } from '../support/without-node.ts';

const root = resolve(import.meta.dir, '../..');
const bun = process.execPath;
const out = mkdtempSync(join(tmpdir(), 'polar-run-new-harnesses-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const taskDir = join(root, 'examples/tasks/mean-empty');
const task = loadTaskDir(taskDir)[0]!.task;
const RUN_TIMEOUT_S = 200;

async function polarRun(harness: string, mode: 'chat' | 'token', extra: string[] = [], name = `${harness}-${mode}`, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string; dir: string }> {
  const dir = join(out, name);
  const argv = [bun, 'src/main.ts', 'run', taskDir, '--harness', harness, '--mode', mode, '--samples', '1', '--out', dir, '--quiet', '--timeout-s', String(RUN_TIMEOUT_S), ...extra];
  const proc = Bun.spawn(argv, { cwd: root, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe', timeout: (RUN_TIMEOUT_S + 15) * 1000, killSignal: 'SIGKILL' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) console.error(`${harness} ${mode}:`, stdout.slice(-3000), stderr.slice(-3000));
  return { code, stdout, stderr, dir };
}


/**
 * Token mode must verify strictly; in chat mode the engine re-renders earlier answers (re-serialised arguments), so a
 * merged trace's context differs from what the engine saw at those joins: accepted knowingly (--accept-rerendered).
 */
async function expectTraceVerifyClean(dir: string, mode: 'chat' | 'token') {
  const accept = mode === 'chat' ? ['--accept-rerendered'] : [];
  const proc = Bun.spawn([bun, 'src/main.ts', 'trace', 'verify', '--db', join(dir, 'results.db'), '--all', ...accept], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(stdout).toContain('1/1 session(s) verified clean');
  expect(code).toBe(0);
}

const CLIS: { harness: string; shellTool: string; what: string }[] = [
  { harness: 'cline', shellTool: 'run_commands', what: 'run_commands takes a list of command lines; the stored provider baseUrl is used' },
  { harness: 'continue', shellTool: 'Bash', what: 'cn -p with a local config.yaml; the {response, status} object decides' },
  { harness: 'kilo', shellTool: 'bash', what: 'kilo run --auto with an openai-compatible provider; bounded retries' },
];

for (const { harness, shellTool, what } of CLIS) {
  test.skipIf(!networkIsolated())(`polar run --harness ${harness} (${what}): tool loop completes in chat and token mode (token mode with no node on PATH), trace verify clean ${NEEDS_ISOLATION}`, async () => {
    // npm test installs every adapter's pinned CLI first (test/support/install-harnesses.ts).
    expect(harnessPaths(defaultHarnessCache(), getHarnessAdapter(harness).package!).installed).toBe(true);
    // Both modes at once: most of a CLI's run time is its own start-up and waiting, not the simulator.
    const runs = await Promise.all([polarRun(harness, 'chat'), polarRun(harness, 'token', [], `${harness}-token`, { PATH: pathWithoutNode() })]);
    for (const [i, mode] of (['chat', 'token'] as const).entries()) {
      expect(runs[i]!.code).toBe(0);
      const records = expectCompletedToolLoop(runs[i]!.dir, task.task_id, { firstCallToolCalls: true, shellTool, mode });
      const user = records[0]!.ir_request.messages.find((m) => m.role === 'user');
      expect(JSON.stringify(user?.content)).toContain('python3 -m unittest -q');
      await expectTraceVerifyClean(runs[i]!.dir, mode);
    }
  }, (RUN_TIMEOUT_S + 60) * 1000);
}

test.skipIf(!networkIsolated())(`polar run --harness custom: only the named variables point a CLI at the gateway; tool loop completes in both modes ${NEEDS_ISOLATION}`, async () => {
  // test/support/run-shell-agent.ts reads OPENAI_BASE_URL / OPENAI_API_KEY / POLAR_MODEL; custom sets exactly these.
  const settings = JSON.stringify({ base_url_env: { OPENAI_BASE_URL: '/v1' }, api_key_env: ['OPENAI_API_KEY'], model_env: ['POLAR_MODEL'] });
  const command = `${bun} ${join(root, 'test/support/run-shell-agent.ts')} {{INSTRUCTION}}`;
  const runs = await Promise.all((['chat', 'token'] as const).map((mode) => polarRun('custom', mode, ['--command', command, '--agent-settings', settings, ...SHELL_AGENT_RUN_FLAGS])));
  for (const [i, mode] of (['chat', 'token'] as const).entries()) {
    expect(runs[i]!.code).toBe(0);
    expectCompletedToolLoop(runs[i]!.dir, task.task_id, { firstCallToolCalls: true, shellTool: 'bash', mode });
    await expectTraceVerifyClean(runs[i]!.dir, mode);
  }
  // Without the key variable the agent cannot authenticate: the variables named in the settings are what it gets.
  const bare = await polarRun('custom', 'chat', ['--command', command, '--agent-settings', JSON.stringify({ base_url_env: { OPENAI_BASE_URL: '/v1' } }), ...SHELL_AGENT_RUN_FLAGS], 'custom-no-key');
  expect(bare.code).not.toBe(0);
  const store = openStore(join(bare.dir, 'results.db'));
  try {
    const [session] = store.sessions.listByTask(task.task_id);
    expect(store.results.get(session!.session_id)?.error).toContain('OPENAI_BASE_URL and OPENAI_API_KEY are required');
  } finally {
    store.close();
  }
}, 300_000);

// OpenClaw is not installed by `npm test` (836 MB with its own Node 24; test/support/install-harnesses.ts), so this
// runs where scripts/harness-matrix.sh or `polar harness install openclaw` has put it into the cache.
const openclawInstalled = harnessPaths(defaultHarnessCache(), getHarnessAdapter('openclaw').package!).installed;
test.skipIf(!networkIsolated() || !openclawInstalled)(
  `polar run --harness openclaw: with the adapter's default tools.deny every request extends the one before (one main chain per session, token mode); with tools_deny [] its runtime-context message breaks each turn as dropped_message (skipped where openclaw is not installed: npm test does not install it) ${NEEDS_ISOLATION}`,
  async () => {
    const runs = await Promise.all([
      polarRun('openclaw', 'token'),
      polarRun('openclaw', 'token', ['--agent-settings', JSON.stringify({ tools_deny: [] })], 'openclaw-token-full-tools'),
    ]);
    for (const run of runs) expect(run.code).toBe(0);
    const denied = expectCompletedToolLoop(runs[0]!.dir, task.task_id, { firstCallToolCalls: true, shellTool: 'exec', mode: 'token' });
    const full = expectCompletedToolLoop(runs[1]!.dir, task.task_id, { firstCallToolCalls: true, shellTool: 'exec', mode: 'token' });
    const marker = '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>';
    // (The system prompt names the marker too; the carrier is a user message.)
    const carriers = (records: typeof denied) => records.filter((r) => r.ir_request.messages.some((m) => m.role === 'user' && JSON.stringify(m.content).includes(marker))).length;
    expect(carriers(denied)).toBe(0);
    expect(carriers(full)).toBe(full.length);
    expect(JSON.stringify(full[0]!.ir_request.messages.at(-1))).toContain(marker);
    const stats = (dir: string) => {
      const store = openStore(join(dir, 'results.db'));
      try {
        const [session] = store.sessions.listByTask(task.task_id);
        return store.results.get(session!.session_id)!.trajectory.metadata.reconstruction_stats!;
      } finally {
        store.close();
      }
    };
    expect(stats(runs[0]!.dir)).toMatchObject({ chains: 1, merged: denied.length });
    expect(stats(runs[1]!.dir)).toMatchObject({ chains: full.length, breaks: { dropped_message: full.length - 1, prefix_break: 0 } });
    for (const run of runs) await expectTraceVerifyClean(run.dir, 'token');
  },
  (RUN_TIMEOUT_S + 60) * 1000,
);
