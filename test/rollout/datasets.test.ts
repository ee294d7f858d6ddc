/**
 * Datasets as tasks (src/rollout/datasets.ts): SWE-bench rows (JSON-string lists, test_patch, local checkout or image),
 * Harbor and task rows, field mapping, split / shard / limit, the same rows from Parquet, errors naming file and row,
 * and `polar run`'s dataset flags as usage errors.
 */
import { afterAll, expect, test } from 'bun:test';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parquetWriteBuffer, parquetWriteFile } from 'hyparquet-writer';
import { loadDataset, readDatasetRows, selectRows } from '../../src/rollout/datasets.ts';
import { toTaskRequest } from '../../src/rollout/task-file.ts';
import { runPolar } from '../support/polar-cli.ts';

const examples = resolve(import.meta.dir, '../../examples');
const swe = join(examples, 'swe', 'data.jsonl');
const scratch = mkdtempSync(join(tmpdir(), 'polar-datasets-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const agent = { harness: 'pi', model_name: 'm' };

test('swebench rows: instruction, swebench_harness config from JSON-string lists, local checkout upload, split in metadata', async () => {
  const tasks = await loadDataset(swe, { format: 'swebench' });
  expect(tasks.map((t) => t.task.task_id)).toEqual(['calc__add-1', 'calc__shout-2']);
  const request = toTaskRequest(tasks[0]!, { agent });
  expect(request.instruction).toStartWith('`add(a, b)` in calc.py');
  expect(request.runtime).toEqual({ kind: 'local', prepare: [{ upload_dir: { src: join(examples, 'swe', 'repos', 'calc'), dest: '.' } }] });
  expect(request.evaluator?.strategy).toBe('swebench_harness');
  expect(request.evaluator?.config).toMatchObject({
    FAIL_TO_PASS: ['test_add (test_calc.CalcTest.test_add)'], PASS_TO_PASS: ['test_mul (test_calc.CalcTest.test_mul)', 'test_shout_word (test_calc.CalcTest.test_shout_word)'],
    log_parser: 'unittest', run_command: 'python3 -m unittest -v test_calc',
  });
  expect(String(request.evaluator?.config?.test_patch)).toContain('+    def test_add(self):');
  expect(request.metadata).toMatchObject({ split: 'train', instance_id: 'calc__add-1', repo: 'example/calc', base_commit: '0000000' });
  expect(request.metadata?.sim_script).toBeDefined();
  expect(request.timeout_seconds).toBe(180);
});

test('an image row runs in a container at /testbed (docker by default, podman with runtime); no repo and no image is an error', async () => {
  const file = join(scratch, 'img.jsonl');
  const row = { instance_id: 'x__y-1', problem_statement: 'fix it', FAIL_TO_PASS: '["t1"]', PASS_TO_PASS: '[]', image_name: 'example/sweb.eval.x__y-1' };
  writeFileSync(file, `${JSON.stringify(row)}\n`);
  const [docker] = await loadDataset(file, { format: 'swebench' });
  expect(docker!.task.runtime).toEqual({ kind: 'docker', image: 'example/sweb.eval.x__y-1', work_dir: '/testbed' });
  expect(docker!.task.evaluator?.config).toMatchObject({ FAIL_TO_PASS: ['t1'], PASS_TO_PASS: [], log_parser: 'pytest' });
  const [podman] = await loadDataset(file, { format: 'swebench', runtime: 'podman' });
  expect(podman!.task.runtime?.kind).toBe('podman');
  writeFileSync(file, `${JSON.stringify({ ...row, image_name: undefined })}\n`);
  await expect(loadDataset(file, { format: 'swebench' })).rejects.toThrow(/img.jsonl line 1: no repo_path .* and no image_name/);
  writeFileSync(file, `${JSON.stringify({ ...row, FAIL_TO_PASS: 3 })}\n`);
  await expect(loadDataset(file, { format: 'swebench' })).rejects.toThrow(/img.jsonl line 1: FAIL_TO_PASS must be a list of strings/);
  writeFileSync(file, `${JSON.stringify(row)}\n{oops\n`);
  await expect(loadDataset(file, { format: 'swebench' })).rejects.toThrow(/img.jsonl line 2/);
});

test('field mapping, split, shard and limit select rows in that order', async () => {
  const rows = Array.from({ length: 10 }, (_, i) => ({ id: `r${i}`, split: i % 2 === 0 ? 'train' : 'test' }));
  const ids = (opts: Parameters<typeof selectRows>[1]) => selectRows(rows, opts).map(({ row }) => row.task_id ?? row.id);
  expect(ids({ split: 'train' })).toEqual(['r0', 'r2', 'r4', 'r6', 'r8']);
  expect(ids({ split: 'train', shard: { index: 1, count: 2 } })).toEqual(['r2', 'r6']);
  expect(ids({ shard: { index: 0, count: 3 }, limit: 2 })).toEqual(['r0', 'r3']);
  expect(ids({ fieldMap: { task_id: 'id' }, limit: 1 })).toEqual(['r0']);
  const renamedDir = join(scratch, 'renamed');
  cpSync(join(examples, 'swe'), renamedDir, { recursive: true });
  const file = join(renamedDir, 'renamed.jsonl');
  const original = readFileSync(swe, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  writeFileSync(file, original.map(({ problem_statement, ...r }) => JSON.stringify({ ...r, question: problem_statement })).join('\n'));
  await expect(loadDataset(file, { format: 'swebench' })).rejects.toThrow(/missing problem_statement/);
  const mapped = await loadDataset(file, { format: 'swebench', fieldMap: { problem_statement: 'question' }, split: 'test' });
  expect(mapped.map((t) => [t.task.task_id, t.task.metadata?.split])).toEqual([['calc__shout-2', 'test']]);
  expect(mapped[0]!.task.instruction).toStartWith('`shout(text)`');
  await expect(loadDataset(file, { format: 'swebench', fieldMap: { problem_statement: 'question' }, split: 'dev' })).rejects.toThrow(/no rows selected \(split "dev"\)/);
});

test('the same rows from Parquet load as from JSONL', async () => {
  const rows = readFileSync(swe, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const columns = Object.keys(rows[0]!);
  // Next to a copy of the example, so relative repo_path and sim_script resolve as they do for the JSONL.
  const dir = join(scratch, 'swe-copy');
  cpSync(join(examples, 'swe'), dir, { recursive: true });
  const file = join(dir, 'data.parquet');
  writeFileSync(file, new Uint8Array(parquetWriteBuffer({ columnData: columns.map((name) => ({ name, data: rows.map((r) => r[name] as string | number) })) })));
  const fromParquet = await loadDataset(file, { format: 'swebench' });
  const fromJsonl = await loadDataset(join(dir, 'data.jsonl'), { format: 'swebench' });
  expect(fromParquet.map((t) => t.task)).toEqual(fromJsonl.map((t) => t.task));
  expect(fromParquet).toHaveLength(2);
});

test('harbor and tasks rows', async () => {
  const harbor = join(scratch, 'harbor.jsonl');
  writeFileSync(harbor, `${JSON.stringify({ path: join(examples, 'harbor', 'write-greeting'), split: 'train' })}\n`);
  const [h] = await loadDataset(harbor, { format: 'harbor' });
  expect([h!.task.task_id, h!.task.evaluator?.strategy, h!.task.metadata?.split]).toEqual(['write-greeting', 'harbor', 'train']);
  writeFileSync(harbor, `${JSON.stringify({ dir: 'x' })}\n`);
  await expect(loadDataset(harbor, { format: 'harbor' })).rejects.toThrow(/harbor.jsonl line 1: harbor rows need "path"/);
  const tasks = join(scratch, 'tasks.json');
  writeFileSync(tasks, JSON.stringify([{ task_id: 'a', instruction: 'do a', timeout_seconds: 30 }, { task_id: 'b', instruction: 'do b', timeout_seconds: 30, bogus: 1 }]));
  await expect(loadDataset(tasks, { format: 'tasks' })).rejects.toThrow(/tasks.json row 2: invalid task file: .*bogus/);
  const [a] = await loadDataset(tasks, { format: 'tasks', limit: 1 });
  expect(toTaskRequest(a!, { agent }).instruction).toBe('do a');
});

test('polar run: a .jsonl without --dataset-format, dataset flags without it, and a bad --shard are usage errors', async () => {
  const out = join(scratch, 'out');
  const noFormat = await runPolar(['run', swe, '--harness', 'pi', '--out', out], { timeoutMs: 30_000 });
  expect([noFormat.code, noFormat.stderr.includes('pass --dataset-format swebench|harbor|tasks')]).toEqual([2, true]);
  const stray = await runPolar(['run', join(examples, 'harbor'), '--harness', 'pi', '--limit', '1', '--out', out], { timeoutMs: 30_000 });
  expect([stray.code, stray.stderr.includes('--limit applies to datasets')]).toEqual([2, true]);
  const shard = await runPolar(['run', swe, '--dataset-format', 'swebench', '--shard', '2/2', '--harness', 'pi', '--out', out], { timeoutMs: 30_000 });
  expect([shard.code, shard.stderr.includes('--shard must be I/N')]).toEqual([2, true]);
});

test('Parquet INT64 columns (pandas/pyarrow integers) read as numbers, nested too; an unsafe one names column and row', async () => {
  const file = join(scratch, 'int64.parquet');
  await parquetWriteFile({
    filename: file,
    columnData: [
      { name: 'task_id', data: ['p-a'], type: 'STRING' },
      { name: 'instruction', data: ['x'], type: 'STRING' },
      { name: 'timeout_seconds', data: [60n], type: 'INT64' },
    ],
  });
  const [task] = await loadDataset(file, { format: 'tasks' });
  expect(task!.task.timeout_seconds).toBe(60);
  expect(await readDatasetRows(file)).toEqual([{ task_id: 'p-a', instruction: 'x', timeout_seconds: 60 }]);
  const swe = join(scratch, 'int64-swe.parquet');
  await parquetWriteFile({
    filename: swe,
    columnData: [
      { name: 'instance_id', data: ['x__y-1'], type: 'STRING' },
      { name: 'problem_statement', data: ['fix it'], type: 'STRING' },
      { name: 'FAIL_TO_PASS', data: ['["t1"]'], type: 'STRING' },
      { name: 'image_name', data: ['example/img'], type: 'STRING' },
      { name: 'timeout_seconds', data: [90n], type: 'INT64' },
    ],
  });
  const [sweTask] = await loadDataset(swe, { format: 'swebench' });
  expect(sweTask!.task.timeout_seconds).toBe(90);
  // Nested: a LIST of INT64 and a struct with an INT64 field (an explicit schema, as pyarrow writes them).
  const nested = join(scratch, 'int64-nested.parquet');
  const nestedSchema = [
    { name: 'root', num_children: 3 },
    { name: 'id', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
    { name: 'counts', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'element', type: 'INT64', repetition_type: 'REQUIRED' },
    { name: 'meta', repetition_type: 'OPTIONAL', num_children: 1 },
    { name: 'n', type: 'INT64', repetition_type: 'REQUIRED' },
  ] as const;
  const writeNested = (counts: bigint[][], n: bigint[]) => parquetWriteFile({
    filename: nested, schema: nestedSchema as never,
    columnData: [{ name: 'id', data: ['a', 'b'] }, { name: 'counts', data: counts }, { name: 'meta', data: n.map((v) => ({ n: v })) }],
  });
  await writeNested([[1n, 2n], [3n]], [5n, 6n]);
  expect(await readDatasetRows(nested)).toEqual([{ id: 'a', counts: [1, 2], meta: { n: 5 } }, { id: 'b', counts: [3], meta: { n: 6 } }]);
  await writeNested([[1n], [3n, 2n ** 60n]], [5n, 6n]);
  await expect(readDatasetRows(nested)).rejects.toThrow(/int64-nested.parquet row 2: counts\[1\]: integer 1152921504606846976 is out of range/);
  await writeNested([[1n], [3n]], [5n, -(2n ** 53n)]);
  await expect(readDatasetRows(nested)).rejects.toThrow(/int64-nested.parquet row 2: meta.n: integer -9007199254740992 is out of range/);
});

test('JSONL errors name the line (blank lines counted); a UTF-8 BOM is stripped', async () => {
  const file = join(scratch, 'lines.jsonl');
  const ok = { task_id: 'a', instruction: 'do a', timeout_seconds: 30 };
  writeFileSync(file, `\uFEFF${JSON.stringify(ok)}\n\n\n${JSON.stringify({ task_id: 'b', instruction: 'do b', timeout_seconds: 30, bogus: 1 })}\n`);
  await expect(loadDataset(file, { format: 'tasks' })).rejects.toThrow(/lines.jsonl line 4: invalid task file: .*bogus/);
  writeFileSync(file, `\uFEFF${JSON.stringify(ok)}\n\n${JSON.stringify({ ...ok, task_id: 'b' })}\n`);
  expect((await loadDataset(file, { format: 'tasks' })).map((t) => t.task.task_id)).toEqual(['a', 'b']);
  writeFileSync(file, `${JSON.stringify(ok)}\n\n[1]\n`);
  await expect(loadDataset(file, { format: 'tasks' })).rejects.toThrow(/lines.jsonl line 3: a row must be an object/);
  writeFileSync(file, `${JSON.stringify(ok)}\n\n${JSON.stringify(ok)}\n`);
  await expect(loadDataset(file, { format: 'tasks' })).rejects.toThrow(/lines.jsonl line 3: duplicate task_id "a" \(also line 1\)/);
  // A JSON array keeps row numbers (its elements are not lines).
  const json = join(scratch, 'rows.json');
  writeFileSync(json, `\uFEFF${JSON.stringify([ok, { ...ok, task_id: 'b', bogus: 1 }])}`);
  await expect(loadDataset(json, { format: 'tasks' })).rejects.toThrow(/rows.json row 2: invalid task file: .*bogus/);
});

test('harbor rows: a task directory that cannot be loaded is an error naming the dataset row', async () => {
  const dir = join(scratch, 'harbor-rows');
  cpSync(join(examples, 'harbor', 'write-greeting'), join(dir, 'h', 'ok'), { recursive: true });
  cpSync(join(examples, 'harbor', 'write-greeting'), join(dir, 'h', 'no-instruction'), { recursive: true });
  rmSync(join(dir, 'h', 'no-instruction', 'instruction.md'));
  const file = join(dir, 'd', 'harbor.jsonl');
  mkdirSync(join(dir, 'd'));
  writeFileSync(file, `${JSON.stringify({ path: '../h/ok' })}\n${JSON.stringify({ path: '../h/nope' })}\n`);
  await expect(loadDataset(file, { format: 'harbor' })).rejects.toThrow(/harbor.jsonl line 2: Harbor task directory not found: .*h\/nope/);
  writeFileSync(file, `${JSON.stringify({ path: '../h/ok' })}\n${JSON.stringify({ path: '../h/no-instruction' })}\n`);
  await expect(loadDataset(file, { format: 'harbor' })).rejects.toThrow(/harbor.jsonl line 2: .*no-instruction: Harbor task has no instruction.md/);
});
