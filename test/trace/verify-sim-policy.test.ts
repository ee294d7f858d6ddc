/**
 * `polar trace verify --sim-policy`: a session sampled under the simulator's learnable variant policy carries
 * log π(variant) on its first sampled token; verify re-scores it from the exported logits (and fails without them, or
 * with other logits, naming the fix). Records are written as the simulator would have produced them.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { choiceFromExport, withChoiceLogprob, type PolicyExport } from '../../src/sim/variant-policy.ts';
import { openStore } from '../../src/store/index.ts';
import { buildTrajectory } from '../../src/trace/index.ts';
import { runPolar } from '../support/polar-cli.ts';
import { rec } from '../support/trace-helpers.ts';

const EOT = 151645;
let dir: string;
let db: string;
const policy = (solve: number): PolicyExport => ({
  version: '3',
  versions: [{ version: '3', logits: { fix: { solve, give_up: 0 } } }],
  tasks: { 'fix@s1': { policy: 'fix', seed: null, variants: { solve: 0.5, give_up: 0.5 } } },
});

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'polar-verify-policy-'));
  db = join(dir, 'polar.db');
  const sessionId = 'sess-policy';
  const choice = choiceFromExport(policy(1.5), 'fix@s1', sessionId, '3')!;
  const p0 = [151644, 872, 198, 2000, 151645, 198, 151644, 77091, 198];
  const a0 = [3000, 3001, EOT];
  const p1 = [...p0, ...a0, 198, 151644, 872, 198, 4000, 151645, 198, 151644, 77091, 198];
  const a1 = [5000, EOT];
  const records: CompletionRecord[] = [[p0, a0], [p1, a1]].map(([prompt, response], seq) => {
    const logprobs = rescoreCompletion(prompt!, response!);
    if (seq === 0) logprobs[0] = withChoiceLogprob(logprobs[0]!, choice.logprob);
    return { ...rec({ seq, prompt: prompt!, response: response!, logprobs, session: sessionId, engineId: 'sim@http://127.0.0.1:1' }), completion_id: `c${seq}`, policy_version: '3' };
  });
  const store = openStore(db);
  for (const r of records) store.completions.insert(r);
  const trajectory = buildTrajectory(records, { strategy: 'prefix_merging', session_id: sessionId, task_id: 'fix@s1', harness: 'pi', status: 'COMPLETED' });
  store.results.put({
    session_id: sessionId, task_id: 'fix@s1', status: 'COMPLETED', trajectory, node_id: 'n1', error: null,
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
  });
  store.close();
  writeFileSync(join(dir, 'policy.json'), JSON.stringify(policy(1.5)));
  writeFileSync(join(dir, 'other.json'), JSON.stringify(policy(-1)));
  writeFileSync(join(dir, 'bad.json'), JSON.stringify({ version: '3' }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the exported policy re-scores the choice on the first token; without it, or with other logits, verify fails', async () => {
  const ok = await runPolar(['trace', 'verify', '--db', db, '--all', '--sim-policy', join(dir, 'policy.json')]);
  expect(ok.stdout).toContain('OK — 1 trace(s), 2 completion(s), 5 sampled token(s) checked, 5 re-scored');
  expect(ok.code).toBe(0);

  const without = await runPolar(['trace', 'verify', '--db', db, '--all']);
  expect(without.code).toBe(1);
  expect(without.stdout).toContain('[rescore_mismatch] trace 0 pos 0');
  expect(without.stderr).toContain('pass --sim-policy');

  const other = await runPolar(['trace', 'verify', '--db', db, '--all', '--sim-policy', join(dir, 'other.json')]);
  expect(other.code).toBe(1);
  expect(other.stdout).toContain('[rescore_mismatch] trace 0 pos 0');

  const bad = await runPolar(['trace', 'verify', '--db', db, '--all', '--sim-policy', join(dir, 'bad.json')]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('not a simulator policy export');
});
