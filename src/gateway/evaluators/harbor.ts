/**
 * `harbor`: run a Harbor task's verifier (`bash /tests/test.sh`) in the session's runtime (or, with refresh_runtime, in
 * a fresh one with the session's diff applied) and read the reward it wrote: `/logs/verifier/reward.txt` (one number),
 * else `/logs/verifier/reward.json` (a number, or an object whose numeric values are averaged). The reward is clamped
 * to [0, 1] and counts only when test.sh exited 0; otherwise it is 0.
 *
 * Config: `{tests_dir: string (host directory holding the task's tests/, uploaded before the run), timeout_s?: number
 * (default 600), env?: Record<string,string> (the task's [verifier].env), workdir?: string (the image's WORKDIR, e.g.
 * "/app")}`.
 *
 * Paths: in a container runtime tests/ is uploaded to /tests and the verifier writes /logs/verifier, as in Harbor. The
 * local runtime (a bubblewrap sandbox over a read-only host) has no /tests or /logs, so there the tests are uploaded to
 * `$HOME/.polar-harbor/tests`, the verifier directory is `$HOME/.polar-harbor/logs/verifier` (the session's HOME), and every text file of tests/ has
 * `/tests`, `/logs/verifier` and the WORKDIR rewritten to those session paths (TEST_DIR is set as Harbor sets it).
 *
 * Details (reward provenance kept on the trajectory): evaluator, config, exit_code, timed_out, reward_source,
 * reward_raw, output_tail.
 * Source: Harbor task format (https://www.harborframework.com/docs/tasks); the reference evaluator
 * (https://github.com/NVIDIA-NeMo/ProRL-Agent-Server, trajectory/evaluator/harbor.py).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { z } from 'zod';
import { harborConfigSchema } from '../../core/contracts/index.ts';
import type { Runtime } from '../runtimes/types.ts';
import { evaluatedRuntime } from './evaluated-runtime.ts';
import type { Evaluator } from './types.ts';

/** The config contract, shared with the rollout server's submit check. */
const ConfigSchema = harborConfigSchema;

const OUTPUT_TAIL = 4000;
/** Files larger than this are uploaded as they are, never rewritten. */
const REWRITE_MAX_BYTES = 1024 * 1024;

/** Where the verifier's directories are inside a runtime. */
export interface HarborPaths {
  tests: string;
  logs: string;
  /** Replacements applied to test files (empty in containers, where the real paths exist). */
  rewrites: Array<[from: string, to: string]>;
}

/** The verifier paths for `runtime`: Harbor's own in containers, session directories in the local runtime. */
export function harborPaths(runtime: Runtime, workdir?: string): HarborPaths {
  if (runtime.kind !== 'local') return { tests: '/tests', logs: '/logs', rewrites: [] };
  // Under the session HOME: one of the few directories the bubblewrap sandbox binds writable.
  const base = join(runtime.homeDir, '.polar-harbor');
  const tests = join(base, 'tests');
  const logs = join(base, 'logs');
  const rewrites: Array<[string, string]> = [['/tests', tests], ['/logs/', `${logs}/`]];
  if (workdir && workdir !== '/') rewrites.push([workdir.replace(/\/+$/, ''), runtime.workDir]);
  return { tests, logs, rewrites };
}

/** Replace each `from` path where it stands as a whole path prefix (not inside a longer name such as /testsuite). */
export function rewritePaths(text: string, rewrites: ReadonlyArray<[string, string]>): string {
  let out = text;
  for (const [from, to] of rewrites) {
    const escaped = from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const tail = from.endsWith('/') ? '' : '(?![A-Za-z0-9_.-])';
    out = out.replace(new RegExp(`(?<![A-Za-z0-9_.~-])${escaped}${tail}`, 'g'), to);
  }
  return out;
}

/** Parse the reward files' text: reward.txt wins; reward.json is a number or the mean of an object's numeric values. */
export function parseHarborReward(txt: string | null, json: string | null): { reward: number; source: string; raw: string } | null {
  if (txt !== null && txt.trim() !== '') {
    const value = Number(txt.trim());
    if (!Number.isFinite(value)) throw new Error(`reward.txt is not a number: ${JSON.stringify(txt.trim().slice(0, 100))}`);
    return { reward: value, source: 'reward.txt', raw: txt.trim() };
  }
  if (json !== null && json.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch (error) {
      throw new Error(`reward.json is not JSON: ${(error as Error).message}`);
    }
    if (typeof parsed === 'number') return { reward: parsed, source: 'reward.json', raw: json.trim() };
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
      const values = Object.values(parsed).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
      if (values.length === 0) throw new Error('reward.json has no numeric values');
      return { reward: values.reduce((a, b) => a + b, 0) / values.length, source: 'reward.json', raw: json.trim() };
    }
    throw new Error('reward.json must be a number or an object of numbers');
  }
  return null;
}

async function uploadTests(runtime: Runtime, testsDir: string, paths: HarborPaths): Promise<void> {
  if (paths.rewrites.length === 0) {
    await runtime.upload(testsDir, paths.tests);
    return;
  }
  const walk = async (dir: string): Promise<void> => {
    for (const name of readdirSync(dir).sort()) {
      const file = join(dir, name);
      const dest = join(paths.tests, relative(testsDir, file));
      if (statSync(file).isDirectory()) {
        await walk(file);
        continue;
      }
      const bytes = readFileSync(file);
      if (bytes.length > REWRITE_MAX_BYTES || bytes.includes(0)) await runtime.upload(file, dest);
      else await runtime.writeFile(dest, rewritePaths(bytes.toString('utf8'), paths.rewrites));
    }
  };
  await walk(testsDir);
}

export const harborEvaluator: Evaluator = {
  name: 'harbor',
  needsDiff: (_config, refresh) => refresh,
  async evaluate(ctx) {
    const parsed = ConfigSchema.safeParse(ctx.config);
    if (!parsed.success) throw new Error(`harbor config: ${z.prettifyError(parsed.error)}`);
    const cfg = parsed.data;
    if (!existsSync(join(cfg.tests_dir, 'test.sh'))) throw new Error(`harbor config: ${join(cfg.tests_dir, 'test.sh')} does not exist`);
    const { runtime, fresh: refresh } = await evaluatedRuntime(ctx);
    const paths = harborPaths(runtime, cfg.workdir);
    const verifierDir = `${paths.logs}/verifier`;
    // Files the agent may have left there (a stale reward, a doctored test) must not count: both start empty.
    await runtime.exec(`rm -rf ${paths.tests} ${verifierDir} && mkdir -p ${verifierDir} ${paths.logs}/agent`, { signal: ctx.signal });
    await uploadTests(runtime, cfg.tests_dir, paths);
    const result = await runtime.exec(['bash', `${paths.tests}/test.sh`], {
      timeoutMs: cfg.timeout_s * 1000, signal: ctx.signal,
      env: { TEST_DIR: paths.tests, ...cfg.env },
      cwd: runtime.workDir,
    });
    const output = `${result.stdout}${result.stderr}`;
    const read = async (name: string) => {
      const r = await runtime.exec(['cat', `${verifierDir}/${name}`], { signal: ctx.signal });
      return r.exitCode === 0 ? r.stdout : null;
    };
    let reward = 0;
    let source: string | null = null;
    let raw: string | null = null;
    let rewardError: string | null = null;
    if (result.exitCode === 0 && !result.timedOut) {
      try {
        const found = parseHarborReward(await read('reward.txt'), await read('reward.json'));
        if (found) {
          reward = Math.min(1, Math.max(0, found.reward));
          source = found.source;
          raw = found.raw;
        } else rewardError = 'test.sh wrote neither reward.txt nor reward.json';
      } catch (error) {
        rewardError = (error as Error).message;
      }
    }
    return {
      outcome_reward: reward,
      details: {
        evaluator: 'harbor', config: cfg, exit_code: result.exitCode, timed_out: result.timedOut, fresh_runtime: refresh,
        reward_source: source, reward_raw: raw, reward_error: rewardError, output_tail: output.slice(-OUTPUT_TAIL),
      },
    };
  },
};
