/**
 * End to end: the real pi CLI in each of its four API modes (`anthropic-messages`, `openai-completions`,
 * `openai-responses`, `google-generative-ai`) completes a two-turn tool loop through the proxy with the simulator as
 * engine (kind `sim`, a registered two-step script: run `ls`, then answer). Both calls of each run are captured, and
 * their logprobs re-score exactly with the simulator's policy. Runs only in a loopback-only network namespace
 * (`node scripts/test.mjs test/e2e/pi-modes.test.ts`). pi's models.json: docs/protocol-notes.md#harness-clis.
 */
import { expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DialectName } from '../../src/core/ir.ts';
import { PI_APIS, piBaseUrl } from '../../src/gateway/harnesses/pi.ts';
import { staticSessions } from '../../src/proxy/sessions.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { LS_WORK_FILES, makeWorkspace, runPiPrint, useSimProxy } from '../support/harness-e2e.ts';
import { harnessBin, HARNESS_CLIS } from '../support/install-harnesses.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const PI = '@mariozechner/pi-coding-agent';
const TASK_ID = 'pi-modes-ls';
const FINAL = 'The directory holds README.txt and main.py.';
/** The proxy dialect each pi API mode speaks. */
const DIALECT_OF: Record<(typeof PI_APIS)[number], DialectName> = {
  'anthropic-messages': 'anthropic-messages',
  'openai-completions': 'openai-chat',
  'openai-responses': 'openai-responses',
  'google-generative-ai': 'gemini',
};

const isolated = networkIsolated();
const e2e = useSimProxy({
  isolated,
  tmpPrefix: 'polar-pi-modes-',
  scripts: { [TASK_ID]: { variants: { solve: { weight: 1, steps: [{ think: 'List the files first.', shell: 'ls' }, { say: FINAL }] } } } },
  // The session key is pi's API key; every mode gets its own session of the same task.
  sessions: staticSessions(Object.fromEntries(PI_APIS.map((api) => [`ps_${api}`, { session_id: `ps_${api}`, task_id: TASK_ID }]))),
});

for (const api of PI_APIS) {
  test.skipIf(!isolated)(`pi (${api}) completes a two-turn tool loop through the proxy; both calls captured and re-scorable ${NEEDS_ISOLATION}`, async () => {
    const bin = harnessBin(PI, HARNESS_CLIS[PI]!, 'pi');
    expect(bin).not.toBeNull();
    const dir = join(e2e.root, api);
    const { home, work } = makeWorkspace(dir, LS_WORK_FILES);
    const agentDir = join(dir, 'agent');
    mkdirSync(agentDir, { recursive: true });
    writeFileSync(
      join(agentDir, 'models.json'),
      JSON.stringify({
        providers: {
          polar: {
            baseUrl: piBaseUrl(api, e2e.proxy.url),
            api,
            apiKey: 'POLAR_API_KEY',
            models: [{ id: 'qwen3-sim', reasoning: false, contextWindow: 32768, maxTokens: 4096 }],
          },
        },
      }),
    );
    const session = `ps_${api}`;
    const { code, stdout, stderr } = await runPiPrint({ bin: bin!, prompt: 'List the files in the current directory', work, home, agentDir, apiKey: session });
    if (code !== 0 || !stdout.includes(FINAL)) console.error(`pi (${api}) exited ${code}\nstdout:\n${stdout.slice(-3000)}\nstderr:\n${stderr.slice(-3000)}`);
    expect(code).toBe(0);
    expect(stdout).toContain(FINAL);

    const records = e2e.proxy.store.completions.listBySession(session);
    expect(records.length).toBeGreaterThanOrEqual(2);
    const toolTurn = records.find((r) => r.ir_response?.toolCalls.some((c) => c.name === 'bash'));
    const finalTurn = records.find((r) => r.ir_request.messages.some((m) => m.role === 'tool'));
    expect(toolTurn).toBeDefined();
    expect(finalTurn).toBeDefined();
    expect(finalTurn!.seq).toBeGreaterThan(toolTurn!.seq);
    expect(JSON.parse(toolTurn!.ir_response!.toolCalls[0]!.arguments)).toEqual({ command: 'ls' });
    // pi replays the call and sends back the real `ls` output, paired with the replayed call's id.
    const call = toolTurn!.ir_response!.toolCalls[0]!;
    const replayed = finalTurn!.ir_request.messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : []));
    expect(replayed.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([[call.name, JSON.parse(call.arguments)]]);
    const toolMessage = finalTurn!.ir_request.messages.find((m) => m.role === 'tool')!;
    expect(toolMessage.role === 'tool' && toolMessage.toolCallId).toBe(replayed[0]!.id);
    // pi sends Gemini calls back without ids (the proxy mints them and pairs by order); the other APIs echo our id.
    if (api !== 'google-generative-ai') expect(replayed[0]!.id).toBe(call.id);
    expect(JSON.stringify(toolMessage)).toContain('README.txt');
    for (const rec of records) {
      expect(rec.dialect).toBe(DIALECT_OF[api]);
      expect(rec.engine_id).toBe(`sim@${e2e.sim.url}`);
      expect(rec.capture_error).toBeNull();
      expect(rec.prompt_ids.length).toBeGreaterThan(0);
      expect(rec.response_ids.length).toBeGreaterThan(0);
      expect(rec.logprobs).toEqual(rescoreCompletion(rec.prompt_ids, rec.response_ids));
    }
  }, 60_000);
}
