/**
 * `polar submit`'s flags on the TaskRequests it sends (src/cli/submit.ts taskRequestsFromPath): `--model` renames the
 * model of a file's own agent when no `--harness` replaces it, for task files and full TaskRequest files alike.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { taskRequestsFromPath } from '../../src/cli/submit.ts';

const scratch = mkdtempSync(join(tmpdir(), 'polar-submit-requests-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('--model without --harness renames the model of a task file\'s own agent, keeping the rest of it', async () => {
  const dir = join(scratch, 'own');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'task.yaml'), 'task_id: own\ninstruction: hi\ntimeout_seconds: 60\nagent: {harness: shell, command: "true", model_name: file-model, env: {A: "1"}}\n');
  const [asWritten] = await taskRequestsFromPath(join(dir, 'task.yaml'), {});
  expect(asWritten!.agent).toMatchObject({ harness: 'shell', model_name: 'file-model' });
  const [renamed] = await taskRequestsFromPath(join(dir, 'task.yaml'), { model: 'flag-model' });
  expect(renamed!.agent).toMatchObject({ harness: 'shell', command: 'true', model_name: 'flag-model', env: { A: '1' } });
  // With --harness the default model is polar-sim.
  const [harnessed] = await taskRequestsFromPath(join(dir, 'task.yaml'), { harness: 'shell', command: 'true' });
  expect(harnessed!.agent).toMatchObject({ harness: 'shell', model_name: 'polar-sim' });
});

test('--model without --harness renames the model of a full TaskRequest file', async () => {
  const file = join(scratch, 'request.json');
  writeFileSync(file, JSON.stringify({ task_id: 'full', instruction: 'hi', agent: { harness: 'shell', command: 'true', model_name: 'file-model' } }));
  const [asWritten] = await taskRequestsFromPath(file, {});
  expect(asWritten!.agent.model_name).toBe('file-model');
  const [renamed] = await taskRequestsFromPath(file, { model: 'flag-model' });
  expect(renamed!.agent).toMatchObject({ harness: 'shell', command: 'true', model_name: 'flag-model' });
});
