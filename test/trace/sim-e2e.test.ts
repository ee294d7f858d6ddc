/**
 * Records captured through the proxy from the simulator pass `polar trace verify` (re-scored with the simulator's
 * policy); corrupting one stored token makes it fail. The conversation is driven over the OpenAI Chat wire format.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { Database } from 'bun:sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { adHocSessions } from '../../src/proxy/sessions.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { packInt32 } from '../../src/store/packing.ts';
import { buildTrajectory } from '../../src/trace/index.ts';

const root = join(import.meta.dir, '..', '..');
const SESSION = 'trace-e2e-session';
let dir: string;
let db: string;
let sim: SimServer;
let store: Store;
let server: ReturnType<typeof Bun.serve>;

const script = {
  variants: {
    solve: { weight: 1, steps: [{ think: 'look first', shell: 'ls' }, { shell: 'cat notes.txt' }, { say: 'All done.' }] },
  },
};
const tools = [{
  type: 'function',
  function: { name: 'bash', description: 'run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
}];

async function polar(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'trace', ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'polar-trace-e2e-'));
  db = join(dir, 'polar.db');
  sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { t1: script } });
  store = openStore(db);
  const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'chat', timeoutMs: 10_000, now: fixedClock(), newId: sequentialIds() });
  await engine.probe();
  const app = createProxyApp({ engine, store, sessions: adHocSessions({ taskId: 't1' }), clock: fixedClock(), newId: sequentialIds() });
  server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch, idleTimeout: 0 });
});
afterAll(async () => {
  await server?.stop(true);
  store?.close();
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('a three-turn tool-using session captured from the simulator merges into one trace and verifies; a corrupted token fails', async () => {
  const messages: unknown[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Inspect the repo.' }];
  for (let turn = 0; turn < 3; turn++) {
    const res = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SESSION}` },
      body: JSON.stringify({ model: 'qwen', messages, tools, temperature: 1, max_tokens: 512 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: string | null; tool_calls?: { id: string }[] } }[] };
    const message = body.choices[0]!.message;
    messages.push(message);
    for (const call of message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: `output of turn ${turn}` });
  }
  const records = store.completions.listBySession(SESSION);
  expect(records).toHaveLength(3);
  expect(records.every((r) => r.engine_id.startsWith('sim@'))).toBe(true);
  const traj = buildTrajectory(records, { strategy: 'prefix_merging', session_id: SESSION, task_id: 't1', harness: 'http', status: 'COMPLETED' });
  expect(traj.metadata.reconstruction_stats).toMatchObject({ completions: 3, chains: 1, merged: 3 });

  const clean = await polar('verify', '--db', db, '--session', SESSION);
  expect(clean.stderr).toBe('');
  expect(clean.code).toBe(0);
  const sampled = records.reduce((n, r) => n + r.response_ids.length, 0);
  expect(clean.stdout).toContain(`1 trace(s), 3 completion(s), ${sampled} sampled token(s) checked, ${sampled} re-scored`);

  // Flip one stored token of the middle completion: its recorded logprob no longer matches the policy's.
  const target = records[1]!;
  const ids = target.response_ids.slice();
  ids[2] = ids[2]! + 1;
  const sqlite = new Database(db);
  sqlite.query('UPDATE completions SET response_ids = ? WHERE completion_id = ?').run(packInt32(ids), target.completion_id);
  sqlite.close();
  const corrupted = await polar('verify', '--db', db, '--session', SESSION);
  expect(corrupted.code).toBe(1);
  expect(corrupted.stdout).toContain('[rescore_mismatch]');
  expect(corrupted.stdout).toContain(target.completion_id);
});
