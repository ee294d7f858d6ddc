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

test('--harness replaces the harness and model of a task file\'s own agent, keeping its env and settings (as polar run does)', async () => {
  const dir = join(scratch, 'replaced');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'task.yaml'), 'task_id: replaced\ninstruction: hi\ntimeout_seconds: 60\nagent: {harness: shell, command: "true", model_name: file-model, env: {A: "1"}, settings: {sampling_params: {temperature: 0.5}}}\n');
  const [request] = await taskRequestsFromPath(join(dir, 'task.yaml'), { harness: 'pi' });
  expect(request!.agent).toEqual({ harness: 'pi', model_name: 'polar-sim', env: { A: '1' }, settings: { sampling_params: { temperature: 0.5 } } });
  // --command (implying --harness shell) keeps them too.
  const [shell] = await taskRequestsFromPath(join(dir, 'task.yaml'), { command: 'echo hi', model: 'm' });
  expect(shell!.agent).toEqual({ harness: 'shell', command: 'echo hi', model_name: 'm', env: { A: '1' }, settings: { sampling_params: { temperature: 0.5 } } });
});

test('--harness keeps the env and settings of a full TaskRequest file\'s agent; another harness keeps only the sampling settings', async () => {
  const file = join(scratch, 'request-env.json');
  const sampling = { sampling_params: { temperature: 0.5 } };
  writeFileSync(file, JSON.stringify({ task_id: 'full-env', instruction: 'hi', agent: { harness: 'pi', model_name: 'file-model', env: { B: '2' }, settings: { api: 'openai-completions', ...sampling } } }));
  const [same] = await taskRequestsFromPath(file, { harness: 'pi', model: 'flag-model' });
  expect(same!.agent).toEqual({ harness: 'pi', model_name: 'flag-model', env: { B: '2' }, settings: { api: 'openai-completions', ...sampling } });
  // pi's `api` means nothing to codex (and its strict settings schema would refuse it at submit).
  const [other] = await taskRequestsFromPath(file, { harness: 'codex', model: 'flag-model' });
  expect(other!.agent).toEqual({ harness: 'codex', model_name: 'flag-model', env: { B: '2' }, settings: sampling });
});

test('an unknown --harness is a usage error naming the known ones', async () => {
  const file = join(scratch, 'request-unknown.json');
  writeFileSync(file, JSON.stringify({ task_id: 'u', instruction: 'hi', agent: { harness: 'shell', command: 'true' } }));
  await expect(taskRequestsFromPath(file, { harness: 'nope' })).rejects.toThrow(/nope.*known/);
});
