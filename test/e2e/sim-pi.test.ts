/**
 * End to end: with the proxy in front of the simulator (engine kind `sim`), the real pi CLI
 * (openai-completions API) completes a scripted two-step shell task: run a command, edit a file with a shell command,
 * say done. The file really changes on disk, and every completion is captured with logprobs that re-score exactly.
 * pi's API key is the session key; the proxy resolves it to the session and its task and forwards both to the
 * simulator (`x-polar-session`, `x-polar-task`), which picks the task's behaviour script.
 * Runs only in a loopback-only network namespace (`node scripts/test.mjs test/e2e/sim-pi.test.ts`).
 */
import { expect, test } from 'bun:test';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { makeWorkspace, runPiPrint, useSimProxy } from '../support/harness-e2e.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const PI = '@mariozechner/pi-coding-agent';
const SESSION = 'ps_e2e_pi_session';
const isolated = networkIsolated();
const e2e = useSimProxy({
  isolated,
  tmpPrefix: 'polar-sim-pi-',
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
  sessions: staticSessions({ [SESSION]: { session_id: SESSION, task_id: 'e2e-edit' } }),
});

test.skipIf(!isolated)(`pi (openai-completions) edits a file through scripted shell calls, via the proxy, all calls captured ${NEEDS_ISOLATION}`, async () => {
  const bin = harnessBin(PI, HARNESS_CLIS[PI]!, 'pi');
  expect(bin).not.toBeNull();
  const { home, work } = makeWorkspace(e2e.root, { 'target.txt': 'the old value\n' });
  const agentDir = join(e2e.root, 'agent');
  mkdirSync(agentDir, { recursive: true });
  writeFileSync(join(agentDir, 'models.json'), JSON.stringify({
    providers: {
      polar: {
        baseUrl: `${e2e.proxy.url}/v1`,
        api: 'openai-completions',
        apiKey: 'POLAR_API_KEY',
        compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
        models: [{ id: 'qwen3-sim', reasoning: false, contextWindow: 131072, maxTokens: 8192 }],
      },
    },
  }));
  const requestsBefore = e2e.sim.metrics().requests; // the proxy's engine probe already made one
  const { code, stdout, stderr } = await runPiPrint({ bin: bin!, prompt: 'Replace "old value" with "new value" in target.txt', work, home, agentDir, apiKey: SESSION });
  if (code !== 0) console.error(`pi exited ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
  expect(code).toBe(0);
  expect(readFileSync(join(work, 'target.txt'), 'utf8')).toBe('the new value\n');
  expect(stdout).toContain('new value');
  // Three model calls (cat, sed, final answer), all through the proxy and all captured in order.
  expect(e2e.sim.metrics().requests - requestsBefore).toBe(3);
  const records = e2e.proxy.store.completions.listBySession(SESSION);
  expect(records.map((r) => r.seq)).toEqual([0, 1, 2]);
  const commands = records.map((r) => r.ir_response?.toolCalls.map((c) => (JSON.parse(c.arguments) as { command: string }).command));
  expect(commands).toEqual([['cat target.txt'], ["sed -i 's/old value/new value/' target.txt"], []]);
  // Each later call carries the real output of the previous command back to the model.
  expect(JSON.stringify(records[1]!.ir_request.messages.filter((m) => m.role === 'tool'))).toContain('the old value');
  expect(records[2]!.ir_request.messages.filter((m) => m.role === 'tool').length).toBe(2);
  for (const rec of records) {
    expect(rec.dialect).toBe('openai-chat');
    expect(rec.engine_id).toBe(`sim@${e2e.sim.url}`);
    expect(rec.capture_error).toBeNull();
    expect(rec.prompt_ids.length).toBeGreaterThan(0);
    expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
  }
}, 60_000);
