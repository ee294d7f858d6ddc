/**
 * `polar trace verify` on a database that holds results but not their completion records (the rollout server's db;
 * the records live in the store of the gateway that ran the proxy): such sessions are SKIPPED with a clear reason, not
 * reported as `unknown_completion` violations. Exit 1 when nothing at all was verified; exit 0 when the rest verified
 * clean (stderr counts the skipped ones); exit 1 on any real violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord, SessionResult } from '../../src/core/records.ts';
import { openStore } from '../../src/store/index.ts';
import { buildTrajectory, formatVerifyReport, verifyTraces } from '../../src/trace/index.ts';
import { rec } from '../support/trace-helpers.ts';

const EOT = 151645;
const root = join(import.meta.dir, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'polar-trace-skip-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Two turns of one session, the second extending the first (one merged trace). */
function records(session: string): CompletionRecord[] {
  return [
    rec({ seq: 0, session, id: `${session}-c0`, prompt: [1, 2], response: [10, 11, EOT] }),
    rec({ seq: 1, session, id: `${session}-c1`, prompt: [1, 2, 10, 11, EOT, 20], response: [30, EOT] }),
  ];
}

function resultOf(session: string, recs: CompletionRecord[]): SessionResult {
  return {
    session_id: session, task_id: 't', status: 'COMPLETED', node_id: 'gw-1', error: null,
    trajectory: buildTrajectory(recs, { strategy: 'prefix_merging', session_id: session, task_id: 't', harness: 'pi', status: 'COMPLETED' }),
    timing: { init_ms: 0, ready_queue_ms: 0, run_ms: 0, postrun_ms: 0, build_ms: 0, eval_ms: 0, e2e_ms: 0 },
  };
}

/** A db with results for `remote` sessions only (no records) and results + records for `local` ones. */
function makeDb(name: string, remote: string[], local: string[], corrupt?: (r: SessionResult) => void): string {
  const path = join(dir, name);
  const store = openStore(path);
  for (const s of remote) store.results.put(resultOf(s, records(s)));
  for (const s of local) {
    const recs = records(s);
    for (const r of recs) store.completions.insert(r);
    const result = resultOf(s, recs);
    corrupt?.(result);
    store.results.put(result);
  }
  store.close();
  return path;
}

async function verify(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'trace', 'verify', ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

describe('verifyTraces without records', () => {
  test('no records at all: skipped, not ok, no violations; the report says where the records are', () => {
    const result = resultOf('s', records('s'));
    const report = verifyTraces([], result.trajectory);
    expect(report).toMatchObject({ ok: false, skipped: 'no_records', violations: [], traces: 1, completions: 0 });
    const text = formatVerifyReport(report, 'session s');
    expect(text).toContain('session s: SKIPPED');
    expect(text).toContain("the gateway's store");
  });

  test('some records missing is still a violation (unknown_completion), not a skip', () => {
    const recs = records('s');
    const report = verifyTraces(recs.slice(0, 1), resultOf('s', recs).trajectory);
    expect(report.skipped).toBeUndefined();
    expect(report.violations.map((v) => v.kind)).toContain('unknown_completion');
  });

  test('a trajectory with no traces and no records is checked (vacuously clean), not skipped', () => {
    const empty = buildTrajectory([], { strategy: 'per_request', session_id: 'e', task_id: 't', harness: 'pi', status: 'ERROR' });
    expect(verifyTraces([], empty)).toMatchObject({ ok: true, violations: [] });
    expect(verifyTraces([], empty).skipped).toBeUndefined();
  });
});

describe('polar trace verify', () => {
  let rolloutDb: string;
  let mixedDb: string;
  let badDb: string;
  beforeAll(() => {
    rolloutDb = makeDb('rollout.db', ['r1', 'r2'], []);
    mixedDb = makeDb('mixed.db', ['r1'], ['l1']);
    badDb = makeDb('bad.db', ['r1'], ['l1'], (r) => {
      r.trajectory.traces[0]!.response_ids[0] = 999;
    });
  });

  test("the rollout server's db: every session skipped, exit 1 'nothing verified', no unknown_completion", async () => {
    const all = await verify('--db', rolloutDb, '--all');
    expect(all.code).toBe(1);
    expect(all.stdout).not.toContain('unknown_completion');
    expect(all.stdout).toContain('session r1 [stored result (COMPLETED)]: SKIPPED');
    expect(all.stdout).toContain('0/0 session(s) verified clean, 2 skipped');
    expect(all.stderr).toContain('2 session(s) skipped: no completion records in');
    expect(all.stderr).toContain('nothing verified');
    const one = await verify('--db', rolloutDb, '--session', 'r2', '--json');
    expect(one.code).toBe(1);
    const reports = JSON.parse(one.stdout) as Array<{ session_id: string; skipped?: string; violations: unknown[] }>;
    expect(reports.map((r) => [r.session_id, r.skipped, r.violations.length])).toEqual([['r2', 'no_records', 0]]);
  });

  test('sessions with records verify; the others are skipped and counted: exit 0', async () => {
    const out = await verify('--db', mixedDb, '--all');
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('session l1 [stored result (COMPLETED)]: OK');
    expect(out.stdout).toContain('1/1 session(s) verified clean, 1 skipped');
    expect(out.stderr).toContain('1 session(s) skipped');
    expect(out.stderr).not.toContain('nothing verified');
  });

  test('a real violation still exits 1 next to a skipped session', async () => {
    const out = await verify('--db', badDb, '--all');
    expect(out.code).toBe(1);
    expect(out.stdout).toContain('[token_mismatch]');
    expect(out.stderr).toContain('1 session(s) violate the trace invariant');
    expect(out.stderr).toContain('1 session(s) skipped');
  });
});
