/** `polar trace verify` / `polar trace show` end to end through the store and the real CLI entry (Bun.spawn). */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Database } from 'bun:sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { rescoreCompletion } from '../../src/sim/policy.ts';
import { openStore } from '../../src/store/index.ts';
import { packInt32 } from '../../src/store/packing.ts';
import { applyRewards, buildTrajectory } from '../../src/trace/index.ts';
import { rec } from '../support/trace-helpers.ts';

const EOT = 151645;
const root = join(import.meta.dir, '..', '..');
const bun = process.execPath;
let dir: string;
let db: string;

/** A three-turn session as the simulator would have recorded it (policy logprobs). */
function simSession(sessionId: string, engine: string): CompletionRecord[] {
  const p0 = [151644, 8948, 198, 1000, 1001, 151645, 198, 151644, 872, 198, 2000, 151645, 198, 151644, 77091, 198];
  const a0 = [3000, 3001, 3002, EOT];
  const p1 = [...p0, 3000, 3001, 3002, EOT, 198, 151644, 872, 198, 4000, 4001, 151645, 198, 151644, 77091, 198];
  const a1 = [5000, 5001, EOT];
  const p2 = [...p1, 5000, 5001, EOT, 198, 151644, 872, 198, 6000, 151645, 198, 151644, 77091, 198];
  const a2 = [7000, EOT];
  return [[p0, a0], [p1, a1], [p2, a2]].map(([prompt, response], seq) => ({
    ...rec({ seq, prompt: prompt!, response: response!, logprobs: rescoreCompletion(prompt!, response!), session: sessionId, engineId: engine }),
    completion_id: `${sessionId}-c${seq}`,
  }));
}

async function polar(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([bun, 'src/main.ts', 'trace', ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** Overwrite one stored response id of a completion (what a bit flip or a buggy writer would do). */
function corruptToken(completionId: string, index: number, value: number): void {
  const sqlite = new Database(db);
  const row = sqlite.query('SELECT response_ids FROM completions WHERE completion_id = ?').get(completionId) as { response_ids: Uint8Array };
  const ids = Array.from(new Int32Array(row.response_ids.slice().buffer));
  ids[index] = value;
  sqlite.query('UPDATE completions SET response_ids = ? WHERE completion_id = ?').run(packInt32(ids), completionId);
  sqlite.close();
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'polar-trace-cli-'));
  db = join(dir, 'polar.db');
  const store = openStore(db);
  for (const r of simSession('sim-a', 'sim@http://127.0.0.1:1')) store.completions.insert(r);
  // A session from a non-simulator engine with its SessionResult stored, as a gateway would leave it.
  const stored = simSession('vllm-b', 'vllm@http://127.0.0.1:2');
  for (const r of stored) store.completions.insert(r);
  const trajectory = buildTrajectory(stored, { strategy: 'prefix_merging', session_id: 'vllm-b', task_id: 't', harness: 'pi', status: 'COMPLETED' });
  store.results.put({
    session_id: 'vllm-b', task_id: 't', status: 'COMPLETED', trajectory, node_id: 'n1', error: null,
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
  });
  store.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('polar trace verify', () => {
  test('bad usage exits 2', async () => {
    expect((await polar('verify', '--db', db)).code).toBe(2);
    expect((await polar('verify', '--db', db, '--all', '--session', 'x')).code).toBe(2);
    const badBuilder = await polar('verify', '--db', db, '--all', '--builder', 'merge_all');
    expect(badBuilder.code).toBe(2);
    expect(badBuilder.stderr).toContain('--builder must be one of per_request|prefix_merging');
    expect((await polar('verify', '--db', join(dir, 'missing.db'), '--all')).code).toBe(2);
  });

  test('clean sessions exit 0; simulator records are re-scored', async () => {
    const all = await polar('verify', '--db', db, '--all');
    expect(all.stderr).toBe('');
    expect(all.code).toBe(0);
    expect(all.stdout).toContain('session sim-a [built now (prefix_merging)]: OK — 1 trace(s), 3 completion(s), 9 sampled token(s) checked, 9 re-scored');
    expect(all.stdout).toContain('session vllm-b [stored result (COMPLETED)]: OK');
    expect(all.stdout).toContain('2/2 session(s) verified clean');
    // A unique prefix names the session, as in trace show; an unknown one exits 1, an ambiguous one 2.
    const prefix = await polar('verify', '--db', db, '--session', 'sim');
    expect(prefix.stdout).toContain('session sim-a [built now (prefix_merging)]: OK');
    expect(prefix.code).toBe(0);
    expect((await polar('verify', '--db', db, '--session', 'nope')).code).toBe(1);
    const perRequest = await polar('verify', '--db', db, '--session', 'sim-a', '--builder', 'per_request', '--json');
    expect(perRequest.code).toBe(0);
    expect(JSON.parse(perRequest.stdout)[0]).toMatchObject({ session_id: 'sim-a', ok: true, traces: 3, rescored_tokens: 9 });
  });

  test('one corrupted stored token makes it exit 1 with a readable report', async () => {
    corruptToken('sim-a-c1', 0, 5999); // re-scoring disowns the recorded logprob
    const sim = await polar('verify', '--db', db, '--session', 'sim-a');
    expect(sim.code).toBe(1);
    expect(sim.stdout).toContain('[rescore_mismatch] trace 0 pos');
    expect(sim.stderr).toContain('1 session(s) violate the trace invariant');
    // The rebuilt trace carries the changed token, so the next completion's trainer context is not what the engine saw.
    const off = await polar('verify', '--db', db, '--session', 'sim-a', '--rescore', 'off');
    expect(off.code).toBe(1);
    expect(off.stdout).toContain('[context_mismatch]');
    const accepted = await polar('verify', '--db', db, '--session', 'sim-a', '--rescore', 'off', '--accept-rerendered');
    expect(accepted.code).toBe(0);
    expect(accepted.stdout).toContain('re-rendered join(s) accepted');

    corruptToken('vllm-b-c2', 0, 7001); // the stored trajectory no longer matches the records
    const stored = await polar('verify', '--db', db, '--session', 'vllm-b');
    expect(stored.code).toBe(1);
    expect(stored.stdout).toContain('[token_mismatch]');
    expect(stored.stdout).toContain('completion vllm-b-c2 sampled 7001');
  });
});

describe('polar trace show', () => {
  test('prints each trace with masked spans bracketed and per-trace stats', async () => {
    const ids = await polar('show', '--db', db, '--session', 'vllm-b', '--ids', '--rebuild');
    expect(ids.code).toBe(0);
    expect(ids.stdout).toContain('1 trace(s) from 3 completion(s)');
    expect(ids.stdout).toContain(`3000 3001 3002 ${EOT} ⟦198 151644 872 198 4000 4001 151645 198 151644 77091 198⟧ 5000`);
    expect(ids.stdout).toContain('sampled (mask 1) 9');
    const text = await polar('show', '--db', db, '--session', 'vllm-b');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('⟦\n<|im_start|>user\n'); // decoded with the Qwen3 tokenizer
    expect((await polar('show', '--db', db, '--session', 'nope')).code).toBe(1);
  });

  test('status and reward agree with polar results: a proxy capture is CAPTURED with reward —, an evaluated session shows its reward', async () => {
    const shown = join(dir, 'shown.db');
    const store = openStore(shown);
    for (const r of simSession('captured', 'vllm@http://127.0.0.1:3')) store.completions.insert(r);
    const judged = simSession('judged', 'vllm@http://127.0.0.1:3');
    for (const r of judged) store.completions.insert(r);
    const built = buildTrajectory(judged, { strategy: 'prefix_merging', session_id: 'judged', task_id: 't', harness: 'pi', status: 'COMPLETED' });
    store.results.put({
      session_id: 'judged', task_id: 't', status: 'COMPLETED', trajectory: applyRewards(built, { outcome_reward: 0.5 }), node_id: 'n1', error: null,
      timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
    });
    store.close();
    const captured = await polar('show', '--db', shown, '--session', 'captured', '--ids');
    expect(captured.code).toBe(0);
    expect(captured.stdout).toContain('session captured [built now (prefix_merging)]: status CAPTURED,');
    expect(captured.stdout).toContain(' · reward — · ');
    expect(captured.stdout).not.toContain('reward 0');
    const evaluated = await polar('show', '--db', shown, '--session', 'judged', '--ids');
    expect(evaluated.code).toBe(0);
    expect(evaluated.stdout).toContain('session judged [stored result (COMPLETED)]: status COMPLETED,');
    expect(evaluated.stdout).toContain(' · reward 0.5 · ');
    // Rebuilt from the records, the traces carry no evaluation of their own: no reward is made up for them.
    const rebuilt = await polar('show', '--db', shown, '--session', 'judged', '--ids', '--rebuild');
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.stdout).toContain('session judged [built now (prefix_merging)]: status COMPLETED,');
    expect(rebuilt.stdout).toContain(' · reward — · ');
  });
});
