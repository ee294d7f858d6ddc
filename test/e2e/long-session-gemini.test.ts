/**
 * A long Gemini CLI session (examples/long-tasks/long-range-sum: 35 model turns, reasoning on every turn) through
 * `polar run --mode token` on the in-process simulator. After ~30 turns Gemini CLI sends a loop-detection side request
 * that asks for JSON matching a schema (`responseMimeType` + `responseSchema`); it must reach the engine as guided
 * decoding and come back as valid JSON, so the CLI never retries it and the session finishes within its agent budget
 * as ONE main chain plus one labelled side chain, at ≥ 10× fewer trainer tokens than per_request.
 * The six-harness version of this check is `MODE=token TASKS=examples/long-tasks scripts/harness-matrix.sh`.
 * Runs only inside a loopback-only network namespace (`node scripts/test.mjs test/e2e/long-session-gemini.test.ts`).
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadTaskDir } from '../../src/rollout/task-file.ts';
import { openStore } from '../../src/store/index.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';

const root = resolve(import.meta.dir, '../..');
const out = mkdtempSync(join(tmpdir(), 'polar-long-gemini-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const taskDir = join(root, 'examples/long-tasks/long-range-sum');

test.skipIf(!networkIsolated())(`gemini_cli, 35 turns, token mode: one main chain, the JSON side request answered once, within budget ${NEEDS_ISOLATION}`, async () => {
  const loaded = loadTaskDir(taskDir)[0]!.task;
  const budgetMs = Number(loaded.metadata?.agent_timeout) * 1000;
  const dir = join(out, 'run');
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'run', taskDir, '--harness', 'gemini_cli', '--mode', 'token', '--samples', '1', '--out', dir, '--quiet', '--timeout-s', '240'], {
    cwd: root, stdout: 'pipe', stderr: 'pipe', timeout: 250_000, killSignal: 'SIGKILL',
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) console.error(stdout.slice(-3000), stderr.slice(-3000));
  expect(code).toBe(0);

  const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8')).harnesses[0];
  expect(summary.completed).toBe(1);
  expect(summary.completions).toBeGreaterThan(30);
  expect(summary.chain_roles.main).toBe(1);
  expect(summary.chain_roles.side).toBeGreaterThanOrEqual(1);
  expect(summary.chain_roles.retry).toBe(0);
  expect(summary.trainer_tokens.per_request / summary.trainer_tokens.prefix_merging).toBeGreaterThanOrEqual(10);

  const store = openStore(join(dir, 'results.db'));
  try {
    const [session] = store.sessions.listByTask(loaded.task_id);
    const result = store.results.get(session!.session_id)!;
    expect(result.status).toBe('COMPLETED');
    expect(result.timing.run_ms).toBeLessThan(budgetMs);
    const records = store.completions.listBySession(session!.session_id);
    const json = records.filter((r) => r.ir_request.responseFormat !== undefined);
    expect(json.length).toBeGreaterThanOrEqual(1);
    for (const r of json) {
      expect(r.ir_request.responseFormat?.type).toBe('json_schema');
      const text = (r.ir_response?.content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');
      expect(JSON.parse(text)).toMatchObject({ unproductive_state_confidence: expect.any(Number) });
    }
    expect(records.flatMap((r) => r.warnings).filter((w) => w.startsWith('response-format-ignored'))).toEqual([]);
    // The side chain is labelled and linked to the main conversation it was made alongside.
    const side = result.trajectory.traces.filter((t) => t.metadata.chain_role === 'side');
    expect(side.length).toBeGreaterThanOrEqual(1);
    expect(side.every((t) => t.metadata.source_chain === 0)).toBe(true);
  } finally {
    store.close();
  }
}, 260_000);
