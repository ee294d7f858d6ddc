/**
 * `polar train-demo [--steps N] [--samples G] [--harness H] [--async] [--out DIR]`: a closed GRPO loop on the
 * simulator through the whole system (src/train/demo.ts): the Python client trains the simulator's variant policy
 * from evaluated groups, syncing weights through pause / drain / policy_version each step. Prints a table per step,
 * writes DIR/steps.jsonl, DIR/pass_at_1.svg, DIR/sim-policy-<mode>.json and DIR/results-<mode>.db, and verifies every trajectory
 * used. Exit 0 when the loop ran and every used trajectory verified clean, 1 otherwise, 2 on bad usage.
 */
import type { Command } from 'commander';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { HARNESS_ADAPTERS } from '../gateway/harnesses/index.ts';
import { openStore } from '../store/index.ts';
import { defaultDemoDir, demoStorePath, runTrainDemo } from '../train/demo.ts';
import { EXIT_FAILED, refuseGivenFlags, UsageError, parsePositiveInt } from './common.ts';

interface Flags {
  steps: number;
  samples: number;
  harness: string;
  async?: boolean;
  maxStaleness: string;
  lr: string;
  out?: string;
  tasks: string;
  python: string;
  trainer?: string;
  concurrency: number;
  taskTimeoutS: number;
}

export function register(program: Command): void {
  program
    .command('train-demo')
    .description("closed GRPO loop: the Python client trains the simulator's variant policy through the whole system")
    .option('--steps <n>', 'training steps', parsePositiveInt('--steps'), 10)
    .option('--samples <g>', 'G: sessions per task per step (the GRPO group size)', parsePositiveInt('--samples'), 8)
    .option('--harness <name>', 'agent harness CLI the sessions run', 'pi')
    .option('--async', 'keep sampling while training (off-policy by at most --max-staleness versions)')
    .option('--max-staleness <k>', 'with --async, K: sampling runs K steps ahead; groups more than K versions behind are dropped', '1')
    .option('--lr <x>', 'learning rate on the logits', '1.5')
    .option('--out <dir>', 'output directory (default out/train-demo-<time>)')
    .option('--tasks <dir>', 'task directories with sim scripts', 'examples/tasks')
    .option('--python <exe>', 'Python ≥ 3.10 interpreter for the trainer', 'python3')
    .option('--trainer <file>', 'trainer script (default examples/closed-loop/train.py)')
    .option('--concurrency <n>', 'harness runs at once (gateway max_run_workers)', parsePositiveInt('--concurrency'), 8)
    .option('--task-timeout-s <s>', "seconds to wait for one step's tasks", parsePositiveInt('--task-timeout-s'), 900)
    .action(async (flags: Flags, command: Command) => {
      if (!HARNESS_ADAPTERS[flags.harness.replaceAll('-', '_')] || flags.harness === 'shell') {
        throw new UsageError(`--harness must be a harness CLI (${Object.keys(HARNESS_ADAPTERS).filter((h) => h !== 'shell').join(', ')}), got ${JSON.stringify(flags.harness)}`);
      }
      const maxStaleness = Number(flags.maxStaleness);
      if (!Number.isInteger(maxStaleness) || maxStaleness < 0) throw new UsageError(`--max-staleness must be an integer ≥ 0, got ${JSON.stringify(flags.maxStaleness)}`);
      if (flags.async && maxStaleness < 1) throw new UsageError('--async needs --max-staleness ≥ 1 (sampling runs that many versions ahead)');
      // A sync step trains on groups sampled at the current version: nothing is ever stale, K changes nothing.
      if (!flags.async) refuseGivenFlags(command, [['maxStaleness', '--max-staleness']], 'to --async (a sync step trains only on groups sampled at the current policy version)');
      const lr = Number(flags.lr);
      if (!Number.isFinite(lr) || lr <= 0) throw new UsageError(`--lr must be a number > 0, got ${JSON.stringify(flags.lr)}`);
      if (!existsSync(flags.tasks)) throw new UsageError(`--tasks ${flags.tasks}: no such directory`);
      const outDir = resolve(flags.out ?? defaultDemoDir(process.cwd()));
      mkdirSync(outDir, { recursive: true });
      const dbPath = demoStorePath(outDir, flags.async === true);
      const store = openStore(dbPath, { checkpoint: 'background' });
      try {
        console.log(`polar train-demo: ${flags.steps} step(s) × G=${flags.samples} on ${flags.tasks} with ${flags.harness} and the simulator, ${flags.async ? `async (K=${maxStaleness})` : 'sync'}; output → ${outDir}`);
        const report = await runTrainDemo({
          tasksDir: flags.tasks, harness: flags.harness, steps: flags.steps, samples: flags.samples, asyncMode: flags.async === true, maxStaleness, lr,
          outDir, store, python: flags.python, trainer: flags.trainer, concurrency: flags.concurrency, taskTimeoutS: flags.taskTimeoutS,
          print: (line) => console.log(line), log: (line) => console.error(`polar train-demo: ${line}`),
        });
        const v = report.verified;
        console.log('');
        console.log(`trace verify: ${v.clean}/${v.sessions} used trajectories clean, ${v.rescored_tokens} sampled tokens re-scored (variant choice included)`);
        console.log(`steps:  ${join(outDir, 'steps.jsonl')}`);
        console.log(`plot:   ${report.plot}`);
        console.log(`verify: polar trace verify --db ${dbPath} --all --sim-policy ${report.policyFile}`);
        if (v.failures.length > 0 || v.sessions === 0) {
          for (const failure of v.failures.slice(0, 10)) console.error(`polar train-demo: trace verify: ${failure}`);
          if (v.sessions === 0) console.error('polar train-demo: no trajectory was used for training');
          process.exitCode = EXIT_FAILED;
        }
      } finally {
        store.close();
      }
    });
}
