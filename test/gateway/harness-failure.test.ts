/**
 * A harness CLI that reports failure ends its session as ERROR (never COMPLETED): the error names the harness, the
 * adapter's reason and the tail of the CLI's stderr/stdout; the trajectory is untrainable and not evaluated; every
 * session's output tail is kept in a host log file (the runtime's directory is gone after teardown). Local runtime,
 * real processes (sh), no network.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TaskRequest } from '../../src/core/records.ts';
import { ERROR_STDERR_TAIL_CHARS, harnessFailureError, harnessLogName, outputTail } from '../../src/gateway/harness-output.ts';
import { HARNESS_ADAPTERS } from '../../src/gateway/harnesses/index.ts';
import { streamJsonResultOutcome, type HarnessAdapter } from '../../src/gateway/harnesses/types.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

/** Like Qwen Code: exits 0 even when the model call failed; only its stream-json result event tells. */
const exitsZeroOnFailure: HarnessAdapter = {
  name: 'result_event_cli',
  package: null,
  launch: (ctx) => ({ argv: ['sh', '-c', ctx.settings.script as string], env: {}, files: [] }),
  outcome: streamJsonResultOutcome,
};

const root = mkdtempSync(join(tmpdir(), 'polar-gw-harness-failure-'));
let store: Store;
let node: GatewayNode;

beforeAll(async () => {
  store = openStore(':memory:');
  node = new GatewayNode({
    nodeId: 'n1', store, workRoot: join(root, 'work'), runtimeDefaults: { isolation: 'none' },
    harnesses: { ...HARNESS_ADAPTERS, result_event_cli: exitsZeroOnFailure },
  });
  await node.start();
});
afterAll(async () => {
  await node.stop();
  store.close();
  rmSync(root, { recursive: true, force: true });
});

const task = (id: string, agent: TaskRequest['agent']): TaskRequest =>
  taskRequest(id, { instruction: 'do it', timeout_seconds: 30, agent, builder: { strategy: 'per_request' }, evaluator: { strategy: 'test_on_output', config: { command: 'true' } } });

test('a CLI that exits non-zero: ERROR with its reason and output tails, not evaluated, untrainable, log kept', async () => {
  const noise = 'x'.repeat(ERROR_STDERR_TAIL_CHARS * 2);
  const command = `echo "partial answer"; printf '%s\\n' "${noise}" >&2; echo "fatal: cannot reach the model" >&2; exit 3`;
  node.dispatch({ session_id: 'fails-exit', task: task('t-exit', { command, model_name: 'm' }), sample_index: 0 });
  const result = await node.wait('fails-exit');
  expect(result.status).toBe('ERROR');
  expect(result.trajectory.status).toBe('ERROR');
  const error = result.error!;
  expect(error.startsWith('harness shell failed: exit 3\n--- stderr (tail) ---\n…')).toBe(true);
  expect(error).toContain('fatal: cannot reach the model\n--- stdout (tail) ---\npartial answer');
  expect(error.length).toBeLessThan(ERROR_STDERR_TAIL_CHARS + 200); // the tail, not the whole stderr
  // Not evaluated (test_on_output would have scored 1): a broken harness never becomes a reward.
  expect(result.trajectory.metadata.evaluation).toEqual({ outcome_reward: 0, details: { skipped: 'session ERROR' } });
  expect(result.trajectory.metadata.training_filter.trainable).toBe(false);
  const outcome = result.trajectory.metadata.harness_outcome as { success: boolean; reason: string; exit_code: number; log: string };
  expect(outcome).toMatchObject({ success: false, reason: 'exit 3', exit_code: 3 });
  expect(outcome.log).toBe(join(root, 'work', 'harness-logs', harnessLogName('fails-exit')));
  const log = readFileSync(outcome.log, 'utf8');
  expect(log).toContain('task: t-exit  sample: 0  harness: shell');
  expect(log).toContain('exit: 3  outcome: failure: exit 3');
  expect(log).toContain(noise); // the log keeps far more than the error
  expect(log).not.toContain('fails-exit'); // the session id is the API key: only its hash names the file
  expect(store.results.get('fails-exit')?.status).toBe('ERROR');
  expect(node.get('fails-exit')?.error).toBe(error);
});

test('a CLI that exits 0 but reports failure in its result event is ERROR too', async () => {
  const script = `echo '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 400 messages[1].role: Invalid option"}'`;
  node.dispatch({ session_id: 'fails-event', task: task('t-event', { harness: 'result_event_cli', model_name: 'm', settings: { script } }), sample_index: 0 });
  const result = await node.wait('fails-event');
  expect(result.status).toBe('ERROR');
  expect(result.error).toStartWith('harness result_event_cli failed: result event success: API Error: 400 messages[1].role: Invalid option (exit 0)\n--- stdout (tail) ---\n{"type":"result"');
  expect(result.error).not.toContain('--- stderr'); // blank streams are left out
});

test('a CLI that succeeds: COMPLETED, evaluated, no error; its output is still logged', async () => {
  node.dispatch({ session_id: 'works', task: task('t-ok', { command: 'echo all good', model_name: 'm' }), sample_index: 1 });
  const result = await node.wait('works');
  expect(result.status).toBe('COMPLETED');
  expect(result.error).toBeNull();
  expect(result.trajectory.metadata.evaluation?.outcome_reward).toBe(1);
  const outcome = result.trajectory.metadata.harness_outcome as { success: boolean; log: string };
  expect(outcome.success).toBe(true);
  expect(existsSync(outcome.log)).toBe(true);
  expect(readFileSync(outcome.log, 'utf8')).toContain('all good');
});

test('outputTail and harnessFailureError: tails are marked when cut, blank output is left out, a kill is named', () => {
  expect(outputTail('abc\n\n', 10)).toBe('abc');
  expect(outputTail('abcdef', 3)).toBe('…def');
  expect(outputTail(' \n', 10)).toBe('');
  expect(harnessFailureError('codex', { exitCode: null, stdout: '', stderr: '' }, { success: false, reason: 'no turn.completed event' }))
    .toBe('harness codex failed: no turn.completed event (killed by a signal)');
});
