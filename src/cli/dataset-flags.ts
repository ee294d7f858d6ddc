/**
 * The dataset flags of `polar run` (`--dataset-format`, `--field`, `--limit`, `--shard`, `--split`) and
 * loading the TASKS argument with them: a dataset file (.jsonl/.json/.parquet, src/rollout/datasets.ts), or task
 * files and directories, ours or Harbor's (src/rollout/task-file.ts).
 */
import { Option, type Command } from 'commander';
import { extname } from 'node:path';
import { DATASET_EXTENSIONS, DATASET_FORMATS, loadDataset, type DatasetFormat } from '../rollout/datasets.ts';
import { loadTaskDir, type LoadedTask } from '../rollout/task-file.ts';
import { UsageError, parsePositiveInt } from './common.ts';
import { parseHarborRuntime } from './harbor-flags.ts';

export interface DatasetFlags {
  datasetFormat?: string;
  field?: Record<string, string>;
  limit?: number;
  shard?: { index: number; count: number };
  split?: string;
  /** Runtime Harbor tasks and dataset rows map onto (polar run: from --runtime). */
  taskRuntime: string;
}

function parseField(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const m = /^([^=\s]+)=([^=\s]+)$/.exec(value);
  if (!m) throw new UsageError(`--field must be DEST=SOURCE (e.g. problem_statement=question), got ${JSON.stringify(value)}`);
  return { ...previous, [m[1]!]: m[2]! };
}

function parseShard(value: string): { index: number; count: number } {
  const m = /^(\d+)\/(\d+)$/.exec(value);
  const index = m ? Number(m[1]) : NaN;
  const count = m ? Number(m[2]) : NaN;
  if (!m || count < 1 || index >= count) throw new UsageError(`--shard must be I/N with 0 ≤ I < N (e.g. 0/4), got ${JSON.stringify(value)}`);
  return { index, count };
}

/** Adds the dataset flags to `command`. */
export function addDatasetFlags(command: Command): Command {
  return command
    .addOption(new Option('--dataset-format <format>', 'read TASKS as a dataset file (.jsonl, .json, .parquet) in this format').choices([...DATASET_FORMATS]))
    .option('--field <dest=source>', 'dataset: copy column SOURCE into field DEST before mapping (repeatable)', parseField)
    .option('--limit <n>', 'dataset: keep the first N selected rows', parsePositiveInt('--limit'))
    .option('--shard <i/n>', 'dataset: keep rows whose position mod N is I (after --split)', parseShard)
    .option('--split <name>', 'dataset: keep rows whose `split` is NAME (rows without one count as NAME)');
}

/** @throws UsageError when a dataset selection flag (--field, --limit, --shard, --split) comes without --dataset-format. */
export function assertNoDatasetSelection(flags: Omit<DatasetFlags, 'taskRuntime'>): void {
  if (flags.datasetFormat !== undefined) return;
  for (const [flag, value] of [['--field', flags.field], ['--limit', flags.limit], ['--shard', flags.shard], ['--split', flags.split]] as const) {
    if (value !== undefined) throw new UsageError(`${flag} applies to datasets: pass --dataset-format too`);
  }
}

/**
 * The tasks named by TASKS. A .jsonl/.json/.parquet file with --dataset-format is a dataset; a .jsonl/.parquet file
 * without it is a usage error; dataset selection flags without --dataset-format are usage errors.
 * @throws UsageError with the loader's message.
 */
export async function loadTasksArg(path: string, flags: DatasetFlags): Promise<LoadedTask[]> {
  const runtime = parseHarborRuntime(flags.taskRuntime, '--task-runtime');
  const ext = extname(path).toLowerCase();
  if (flags.datasetFormat === undefined) {
    if (ext === '.jsonl' || ext === '.parquet') throw new UsageError(`${path} is a dataset: pass --dataset-format ${DATASET_FORMATS.join('|')}`);
    assertNoDatasetSelection(flags);
  } else if (!DATASET_EXTENSIONS.includes(ext)) throw new UsageError(`--dataset-format needs a ${DATASET_EXTENSIONS.join(', ')} file, got ${path}`);
  try {
    if (flags.datasetFormat !== undefined) {
      return await loadDataset(path, {
        format: flags.datasetFormat as DatasetFormat, fieldMap: flags.field, limit: flags.limit, shard: flags.shard, split: flags.split, runtime,
      });
    }
    return loadTaskDir(path, { runtime });
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError((error as Error).message);
  }
}
