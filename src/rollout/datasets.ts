/**
 * Datasets as tasks: rows of a JSONL, JSON (an array) or Parquet file, read in one of three formats.
 *
 * - `tasks`: each row is a task file's content (src/rollout/task-file.ts; relative paths against the dataset's folder).
 * - `harbor`: each row names a Harbor task directory in `path` (src/rollout/harbor-task.ts).
 * - `swebench`: SWE-bench / SWE-Gym rows: `instance_id`, `problem_statement`, `FAIL_TO_PASS`, `PASS_TO_PASS` (lists, or
 *   JSON strings of lists as the published datasets hold them), optional `test_patch`, `base_commit`, `repo`,
 *   `eval_prepare` (string or list), `log_parser` (pytest, default, or unittest), `run_command`, `test_command`,
 *   `timeout_seconds`, `sim_script` (path), and where the code is: `image_name`/`docker_image` (a container image with
 *   the repository at /testbed) or `repo_path` (a local directory, relative to the dataset, uploaded into the session).
 *
 * Every row may carry `split`. Selection, in order: `split` keeps rows whose `split` is that name (rows without the
 * field count as that split: a file per split), `shard: {index, count}` keeps rows whose position mod count is index,
 * `limit` keeps the first N. `fieldMap` (`{dest: source}`) copies fields before the format reads them, so a dataset
 * spelling `question` can feed `problem_statement`. The split travels as `metadata.split`. Errors name the file and the
 * row (`row N`; in a JSONL file `line N`, its line number with blank lines counted). Parquet INT64 columns (bigints in
 * hyparquet) read as numbers when they fit one exactly.
 * Source: SWE-bench dataset fields (https://github.com/SWE-bench/SWE-bench, harness/constants, `SWEbenchInstance`).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, join, resolve } from 'node:path';
import { parquetReadObjects } from 'hyparquet';
import type { PrepareAction } from '../core/contracts/index.ts';
import { loadHarborTask, type HarborRuntimeKind } from './harbor-task.ts';
import { taskFromObject, type LoadedTask } from './task-file.ts';

export const DATASET_FORMATS = ['swebench', 'harbor', 'tasks'] as const;
export type DatasetFormat = (typeof DATASET_FORMATS)[number];

export interface DatasetOptions {
  format: DatasetFormat;
  /** `{dest: source}`: row[dest] = row[source] before mapping. */
  fieldMap?: Record<string, string>;
  limit?: number;
  shard?: { index: number; count: number };
  split?: string;
  /** Runtime for Harbor rows and SWE rows (default local; docker/podman need an image). */
  runtime?: HarborRuntimeKind;
}

/** File extensions read as datasets. */
export const DATASET_EXTENSIONS = ['.jsonl', '.json', '.parquet'];

type Row = Record<string, unknown>;

/** The rows of a dataset file. @throws Error naming the file (and row or line) on unreadable content. */
export async function readDatasetRows(path: string): Promise<Row[]> {
  return (await readLabelledRows(path)).map(({ row }) => row);
}

/**
 * The rows of a dataset file, each with where it is for errors: `line N` (1-based, blank lines counted) in a JSONL
 * file, `row N` in a JSON array or a Parquet file. A UTF-8 byte order mark at the start of a JSON(L) file is dropped.
 * Parquet INT64 values (hyparquet's bigint, pandas' and pyarrow's default integer type) become numbers.
 * @throws Error naming the file and row on unreadable content or an integer beyond Number.MAX_SAFE_INTEGER.
 */
async function readLabelledRows(path: string): Promise<Array<{ row: Row; label: string }>> {
  const ext = extname(path).toLowerCase();
  let rows: Array<{ row: unknown; label: string }>;
  if (ext === '.parquet') {
    const bytes = readFileSync(path);
    let raw: unknown[];
    try {
      raw = await parquetReadObjects({ file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
    } catch (error) {
      throw new Error(`${path}: cannot read Parquet: ${(error as Error).message}`);
    }
    rows = raw.map((row, i) => ({ row: withoutBigints(row, '', `${path} row ${i + 1}`), label: `row ${i + 1}` }));
  } else {
    const text = readFileSync(path, 'utf8').replace(/^\uFEFF/, '');
    if (ext === '.json') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (error) {
        throw new Error(`${path}: ${(error as Error).message}`);
      }
      if (!Array.isArray(parsed)) throw new Error(`${path}: expected an array of rows`);
      rows = parsed.map((row, i) => ({ row, label: `row ${i + 1}` }));
    } else if (ext === '.jsonl') {
      rows = [];
      text.split('\n').forEach((line, i) => {
        if (line.trim() === '') return;
        try {
          rows.push({ row: JSON.parse(line), label: `line ${i + 1}` });
        } catch (error) {
          throw new Error(`${path} line ${i + 1}: ${(error as Error).message}`);
        }
      });
    } else throw new Error(`${path}: a dataset is a ${DATASET_EXTENSIONS.join(', ')} file`);
  }
  for (const { row, label } of rows) {
    if (row === null || typeof row !== 'object' || Array.isArray(row)) throw new Error(`${path} ${label}: a row must be an object`);
  }
  return rows as Array<{ row: Row; label: string }>;
}

/**
 * `value` with every bigint (nested in lists and structs too) as a number.
 * @throws Error naming `where` and the column path (`col`, `col[2]`, `col.field`) for one beyond ±(2^53 - 1).
 */
function withoutBigints(value: unknown, column: string, where: string): unknown {
  if (typeof value === 'bigint') {
    if (!Number.isSafeInteger(Number(value))) {
      throw new Error(`${where}: ${column}: integer ${value} is out of range for a JavaScript number (beyond ±${Number.MAX_SAFE_INTEGER})`);
    }
    return Number(value);
  }
  if (Array.isArray(value)) return value.map((v, i) => withoutBigints(v, `${column}[${i}]`, where));
  const proto = value !== null && typeof value === 'object' ? Object.getPrototypeOf(value) : undefined;
  if (proto === Object.prototype || proto === null) {
    const fields = Object.entries(value as Record<string, unknown>);
    return Object.fromEntries(fields.map(([k, v]) => [k, withoutBigints(v, column === '' ? k : `${column}.${k}`, where)]));
  }
  return value;
}

/** Rows selected by split, shard and limit (in that order), with fieldMap applied. */
export function selectRows(rows: readonly Row[], opts: Omit<DatasetOptions, 'format'>): Array<{ row: Row; index: number }> {
  let out = rows.map((row, index) => ({ row: mapFields(row, opts.fieldMap), index }));
  if (opts.split !== undefined) out = out.filter(({ row }) => row.split === undefined || row.split === null || row.split === opts.split);
  if (opts.shard) {
    const { index, count } = opts.shard;
    out = out.filter((_, i) => i % count === index);
  }
  if (opts.limit !== undefined) out = out.slice(0, opts.limit);
  return out;
}

function mapFields(row: Row, fieldMap: Record<string, string> | undefined): Row {
  if (!fieldMap) return row;
  const out = { ...row };
  for (const [dest, source] of Object.entries(fieldMap)) if (source in row) out[dest] = row[source];
  return out;
}

/**
 * Tasks from a dataset file. @throws Error naming the file and row on a missing or mistyped field, or when the
 * selection is empty.
 */
export async function loadDataset(path: string, opts: DatasetOptions): Promise<LoadedTask[]> {
  const abs = resolve(path);
  if (!existsSync(abs)) throw new Error(`dataset not found: ${path}`);
  const labelled = await readLabelledRows(abs);
  const selected = selectRows(labelled.map(({ row }) => row), opts);
  if (selected.length === 0) throw new Error(`${path}: no rows selected${opts.split !== undefined ? ` (split ${JSON.stringify(opts.split)})` : ''}`);
  const tasks = selected.map(({ row, index }) => {
    const label = labelled[index]!.label;
    const where = `${path} ${label}`;
    const split = typeof row.split === 'string' ? row.split : opts.split;
    let loaded: LoadedTask;
    if (opts.format === 'tasks') {
      const { split: _, ...task } = row;
      loaded = taskFromObject(task, abs, where);
    } else if (opts.format === 'harbor') {
      if (typeof row.path !== 'string') throw new Error(`${where}: harbor rows need "path" (a Harbor task directory)`);
      try {
        loaded = loadHarborTask(resolve(dirname(abs), row.path), { runtime: opts.runtime });
      } catch (error) {
        throw new Error(`${where}: ${error instanceof Error ? error.message : String(error)}`);
      }
    } else loaded = sweTask(row, abs, where, opts.runtime ?? 'local');
    if (split !== undefined) loaded.task.metadata = { ...loaded.task.metadata, split };
    return { loaded, label };
  });
  const seen = new Map<string, string>();
  for (const { loaded: t, label } of tasks) {
    const other = seen.get(t.task.task_id);
    if (other !== undefined) throw new Error(`${path} ${label}: duplicate task_id ${JSON.stringify(t.task.task_id)} (also ${other})`);
    seen.set(t.task.task_id, label);
  }
  return tasks.map(({ loaded }) => loaded);
}

/** A list field: an array of strings, or a JSON string of one (the published SWE-bench datasets store them so). */
function stringList(row: Row, key: string, where: string, required: boolean): string[] {
  let value = row[key];
  if (value === undefined || value === null) {
    if (required) throw new Error(`${where}: missing ${key}`);
    return [];
  }
  if (typeof value === 'string') {
    const text = value.trim();
    if (text.startsWith('[')) {
      try {
        value = JSON.parse(text);
      } catch {
        throw new Error(`${where}: ${key} is not a JSON list`);
      }
    } else value = text === '' ? [] : [text];
  }
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw new Error(`${where}: ${key} must be a list of strings`);
  return value as string[];
}

function optionalString(row: Row, key: string, where: string): string | undefined {
  const v = row[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new Error(`${where}: ${key} must be a string`);
  return v;
}

function sweTask(row: Row, file: string, where: string, runtimeKind: HarborRuntimeKind): LoadedTask {
  const id = optionalString(row, 'instance_id', where);
  if (!id) throw new Error(`${where}: missing instance_id`);
  const statement = optionalString(row, 'problem_statement', where);
  if (!statement) throw new Error(`${where}: missing problem_statement`);
  const image = optionalString(row, 'image_name', where) ?? optionalString(row, 'docker_image', where);
  const repoPath = optionalString(row, 'repo_path', where);
  const baseCommit = optionalString(row, 'base_commit', where);
  const logParser = optionalString(row, 'log_parser', where);
  if (logParser !== undefined && logParser !== 'pytest' && logParser !== 'unittest') throw new Error(`${where}: log_parser must be pytest or unittest`);
  const testCommand = optionalString(row, 'test_command', where);
  const timeout = row.timeout_seconds ?? 1800;
  if (typeof timeout !== 'number' || !(timeout > 0)) throw new Error(`${where}: timeout_seconds must be a positive number`);
  const dir = dirname(file);
  let runtime: LoadedTask['task']['runtime'];
  if (runtimeKind === 'local' && repoPath !== undefined) {
    const src = resolve(dir, repoPath);
    if (!existsSync(src)) throw new Error(`${where}: repo_path not found: ${src}`);
    const prepare: PrepareAction[] = [{ upload_dir: { src, dest: '.' } }];
    if (baseCommit && existsSync(join(src, '.git'))) prepare.push({ exec: { command: `git checkout -q ${baseCommit}` } });
    runtime = { kind: 'local', prepare };
  } else if (image !== undefined) {
    runtime = { kind: runtimeKind === 'local' ? 'docker' : runtimeKind, image, work_dir: '/testbed' };
  } else {
    throw new Error(`${where}: no repo_path (a local checkout) and no image_name/docker_image: nothing to run instance ${id} in`);
  }
  const evalPrepare = stringList(row, 'eval_prepare', where, false);
  const config: Record<string, unknown> = {
    FAIL_TO_PASS: stringList(row, 'FAIL_TO_PASS', where, true),
    PASS_TO_PASS: stringList(row, 'PASS_TO_PASS', where, false),
    ...(optionalString(row, 'test_patch', where) ? { test_patch: row.test_patch } : {}),
    ...(evalPrepare.length > 0 ? { eval_prepare: evalPrepare } : {}),
  };
  if (testCommand !== undefined && logParser === undefined) config.test_command = testCommand;
  else {
    config.log_parser = logParser ?? 'pytest';
    const run = optionalString(row, 'run_command', where);
    if (run) config.run_command = run;
  }
  const simScript = optionalString(row, 'sim_script', where);
  const base = taskFromObject({
    task_id: id, instruction: statement, timeout_seconds: timeout, runtime,
    evaluator: { strategy: 'swebench_harness', config },
    metadata: { instance_id: id, ...(typeof row.repo === 'string' ? { repo: row.repo } : {}), ...(baseCommit ? { base_commit: baseCommit } : {}) },
    ...(simScript ? { sim_script: simScript } : {}),
  }, file, where);
  return base;
}
