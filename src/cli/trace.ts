/**
 * `polar trace verify` and `polar trace show` (docs/architecture.md#processes, invariant: docs/architecture.md#trajectory-builders).
 * verify: exit 0 when every checked session is clean, 1 with a readable report on any violation, 2 on bad usage.
 * A session whose trajectory names completions that this database has no records of at all (the rollout server's db:
 * records live in the store of the process that ran the proxy, a gateway's) is *skipped*, not a violation: it is
 * listed as SKIPPED and counted on stderr. Exit 1 as well when nothing at all was verified (every session skipped),
 * since a verify that checked nothing must not look clean; exit 0 when some sessions were verified clean and the
 * rest skipped (the stderr line says how many). Partially missing records stay `unknown_completion` violations.
 */
import type { Command } from 'commander';
import { existsSync, writeFileSync } from 'node:fs';
import { sessionHtml } from '../observe/dashboard/routes.ts';
import { evaluatedReward, resolveSession, sessionStatus } from '../observe/results.ts';
import type { BuilderName, CompletionRecord, Trajectory } from '../core/records.ts';
import { scoreLogprob } from '../sim/policy.ts';
import { readPolicyExport, sessionRescorer, type PolicyExport } from '../sim/variant-policy.ts';
import { openStore, type Store } from '../store/index.ts';
import { loadTokenizer } from '../tokenization/index.ts';
import { attemptOf, BUILDER_NAMES, buildTrajectory, formatVerifyReport, renderTrace, trajectoryAttempt, verifyTraces } from '../trace/index.ts';
import { EXIT_FAILED, UsageError } from './common.ts';

type Rescore = 'auto' | 'on' | 'off';

interface SourceOptions {
  builder?: string;
  eotIds?: string;
  rebuild?: boolean;
}

function parseBuilder(value: string | undefined): BuilderName | undefined {
  if (value === undefined) return undefined;
  if (!(BUILDER_NAMES as string[]).includes(value)) {
    throw new UsageError(`--builder must be one of ${BUILDER_NAMES.join('|')}, got ${JSON.stringify(value)}`);
  }
  return value as BuilderName;
}

function parseEotIds(value: string | undefined): number[] | undefined {
  if (value === undefined) return undefined;
  const ids = value.split(',').map((s) => Number(s.trim()));
  if (ids.length === 0 || !ids.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new UsageError(`--eot-ids must be comma-separated token ids, got ${JSON.stringify(value)}`);
  }
  return ids;
}

function openExisting(path: string): Store {
  if (path !== ':memory:' && !existsSync(path)) throw new UsageError(`--db ${path}: no such file`);
  return openStore(path);
}

/**
 * The trajectory to check for a session: the stored SessionResult's when there is one (unless `--rebuild`), else
 * one built now from the records with `--builder` (default prefix_merging). `attempt` is the dispatch attempt it
 * comes from: the stored result's (results stored before attempts existed are attempt 0), else the latest attempt
 * among the records; completions of other attempts (a killed or re-dispatched run) never enter it. `evaluated`:
 * its traces carry an evaluator's rewards (the stored result's, evaluated); a trajectory built now has none (the
 * builder's reward 0 is not a verdict, and its COMPLETED status only keeps the builder's mask, as in `polar export`).
 */
function trajectoryFor(
  store: Store,
  sessionId: string,
  records: CompletionRecord[],
  opts: SourceOptions,
): { trajectory: Trajectory; source: string; attempt: number | undefined; evaluated: boolean } {
  const builder = parseBuilder(opts.builder);
  const result = store.results.get(sessionId);
  const resultAttempt = result?.trajectory ? (trajectoryAttempt(result.trajectory) ?? 0) : undefined;
  const stored = opts.rebuild ? null : result;
  if (stored?.trajectory) {
    return { trajectory: stored.trajectory, source: `stored result (${stored.status})`, attempt: resultAttempt, evaluated: evaluatedReward(stored) !== null };
  }
  const session = store.sessions.get(sessionId);
  const taskId = session?.task_id ?? 'unknown';
  const harness = (session ? store.tasks.get(session.task_id)?.task.agent.harness : undefined) ?? 'unknown';
  const strategy = builder ?? 'prefix_merging';
  const trajectory = buildTrajectory(records, {
    strategy,
    eotIds: parseEotIds(opts.eotIds),
    session_id: sessionId,
    task_id: taskId,
    harness,
    status: 'COMPLETED',
    ...(resultAttempt !== undefined ? { attempt: resultAttempt } : {}),
  });
  return { trajectory, source: `built now (${strategy})`, attempt: trajectoryAttempt(trajectory), evaluated: false };
}

/** `, attempt A (N completion(s) of other attempts stored, left out)` when the session ran more than once. */
function attemptNote(records: readonly CompletionRecord[], attempt: number | undefined): string {
  if (attempt === undefined) return '';
  const others = records.filter((r) => attemptOf(r) !== attempt).length;
  return others === 0 && attempt === 0 ? '' : `, attempt ${attempt}${others > 0 ? ` (${others} completion(s) of other attempts stored, left out)` : ''}`;
}

export function register(program: Command): void {
  const trace = program.command('trace').description('inspect and verify trajectories built from captured completions');

  trace
    .command('verify')
    .description('check that every loss_mask=1 token is a sampled token with its recorded (and, under the simulator, re-scored) logprob')
    .requiredOption('--db <file>', 'SQLite store written by polar')
    .option('--session <id>', 'verify one session: its id or a unique prefix of it (polar results lists them)')
    .option('--all', 'verify every session in the store')
    .option('--builder <name>', `builder when no result is stored, or with --rebuild (${BUILDER_NAMES.join('|')}; default prefix_merging)`)
    .option('--rebuild', 'build from the records even when a SessionResult is stored')
    .option('--eot-ids <ids>', 'end-of-turn token ids for building, comma-separated (default: detected from the records)')
    .option('--rescore <mode>', 'auto|on|off: re-score mask-1 logprobs with the simulator policy (auto: when records come from sim@)', 'auto')
    .option('--accept-rerendered', 'accept joins whose next prompt held a re-rendered version of the sampled answer (chat mode) instead of reporting them as context_mismatch; their tokens are re-scored in the engine\'s own context')
    .option('--sim-policy <file|url>', "the simulator's learnable variant policy (GET /sim/policy export, or the simulator's URL): re-score each session's variant choice too")
    .option('--json', 'print the reports as JSON')
    .action(async (opts: SourceOptions & { db: string; session?: string; all?: boolean; rescore: string; acceptRerendered?: boolean; simPolicy?: string; json?: boolean }) => {
      if (Boolean(opts.session) === Boolean(opts.all)) throw new UsageError('give exactly one of --session ID or --all');
      if (!['auto', 'on', 'off'].includes(opts.rescore)) throw new UsageError(`--rescore must be auto|on|off, got ${JSON.stringify(opts.rescore)}`);
      parseBuilder(opts.builder);
      parseEotIds(opts.eotIds);
      const rescore = opts.rescore as Rescore;
      let policy: PolicyExport | null = null;
      if (opts.simPolicy !== undefined) {
        try {
          policy = await readPolicyExport(opts.simPolicy);
        } catch (error) {
          throw new UsageError(`--sim-policy: ${(error as Error).message}`);
        }
      }
      const store = openExisting(opts.db);
      try {
        if (opts.session) {
          try {
            opts.session = resolveSession(store, { session: opts.session });
          } catch (error) {
            // A session that is not there is a failed lookup (exit 1); an ambiguous prefix is usage (2).
            const message = (error as Error).message;
            throw /^no session id starts with/.test(message) ? error : new UsageError(message);
          }
        }
        const ids = opts.session
          ? [opts.session]
          : [...new Set([...store.completions.listSessionIds(), ...store.results.listAll().map((r) => r.session_id)])];
        if (ids.length === 0) throw new Error(`${opts.db} holds no sessions`);
        let failed = 0;
        let skipped = 0;
        let firstTokenRescoreMisses = 0;
        const reports: unknown[] = [];
        for (const sessionId of ids) {
          const records = store.completions.listBySession(sessionId);
          if (records.length === 0 && !store.results.get(sessionId)) throw new Error(`session ${sessionId} has no records in ${opts.db}`);
          const { trajectory, source, attempt } = trajectoryFor(store, sessionId, records, opts);
          const fromSim = records.length > 0 && records.every((r) => r.engine_id.startsWith('sim@'));
          const useRescore = rescore === 'on' || (rescore === 'auto' && fromSim);
          const taskId = store.results.get(sessionId)?.task_id ?? (trajectory.traces[0]?.metadata.task_id || null);
          const scorer = policy ? sessionRescorer(policy, taskId, sessionId, records) : scoreLogprob;
          const report = verifyTraces(records, trajectory, {
            ...(useRescore ? { rescore: scorer } : {}), ...(attempt !== undefined ? { attempt } : {}), acceptRerenderedJoins: opts.acceptRerendered === true,
          });
          if (report.skipped) skipped++;
          else if (!report.ok) {
            failed++;
            const misses = report.violations.filter((v) => v.kind === 'rescore_mismatch');
            if (misses.length > 0 && misses.length === report.violations.length && misses.every((v) => v.position === misses[0]!.position)) firstTokenRescoreMisses++;
          }
          if (opts.json) reports.push({ session_id: sessionId, source, ...report });
          else console.log(formatVerifyReport(report, `session ${sessionId} [${source}]`));
        }
        const checked = ids.length - skipped;
        if (opts.json) console.log(JSON.stringify(reports, null, 2));
        else console.log(`${checked - failed}/${checked} session(s) verified clean${skipped > 0 ? `, ${skipped} skipped` : ''}`);
        if (skipped > 0) {
          console.error(
            `polar: trace verify: ${skipped} session(s) skipped: no completion records in ${opts.db} for them ` +
              "(records live where the proxy ran, e.g. the gateway's db; verify that one with --db)",
          );
        }
        if (failed > 0) {
          console.error(`polar: trace verify: ${failed} session(s) violate the trace invariant`);
          if (!policy && firstTokenRescoreMisses > 0) {
            console.error(
              `polar: trace verify: ${firstTokenRescoreMisses} session(s) fail only the re-score of one token; a session sampled under the ` +
                "simulator's learnable variant policy carries log π(variant) on its first token: pass --sim-policy FILE|URL (GET /sim/policy) to re-score it",
            );
          }
          process.exitCode = EXIT_FAILED;
        } else if (checked === 0) {
          console.error('polar: trace verify: nothing verified: no session had its completion records in this database');
          process.exitCode = EXIT_FAILED;
        }
      } finally {
        store.close();
      }
    });

  trace
    .command('show')
    .description("print a session's traces decoded for humans; masked (loss_mask 0) spans are bracketed ⟦…⟧")
    .requiredOption('--db <file>', 'SQLite store written by polar')
    .option('--session <id>', 'the session to show: its id or a unique prefix of it (polar results lists them)')
    .option('--task <id>', 'with --sample: the session of this task and sample (its last attempt when a polar run --max-retries retry re-ran it)')
    .option('--sample <n>', 'sample index within --task (default: the only one)', parseSampleIndex)
    .option('--html <file>', "write the session as a self-contained HTML page (the dashboard's token view) instead of printing it")
    .option('--builder <name>', `builder when no result is stored, or with --rebuild (${BUILDER_NAMES.join('|')}; default prefix_merging)`)
    .option('--rebuild', 'build from the records even when a SessionResult is stored')
    .option('--eot-ids <ids>', 'end-of-turn token ids for building, comma-separated')
    .option('--tokenizer <dir>', 'model directory to decode with (default: the embedded Qwen3 tokenizer)')
    .option('--ids', 'print token ids instead of decoded text')
    .option('--prompt', 'print the prompt too')
    .option('--color <mode>', 'auto|always|never', 'auto')
    .action(async (opts: SourceOptions & { db: string; session?: string; task?: string; sample?: number; html?: string; tokenizer?: string; ids?: boolean; prompt?: boolean; color: string }) => {
      if (!['auto', 'always', 'never'].includes(opts.color)) throw new UsageError(`--color must be auto|always|never, got ${JSON.stringify(opts.color)}`);
      if ((opts.session === undefined) === (opts.task === undefined)) throw new UsageError('give --session ID (or a unique prefix) or --task T [--sample N]');
      if (opts.sample !== undefined && opts.task === undefined) throw new UsageError('--sample needs --task');
      parseBuilder(opts.builder);
      parseEotIds(opts.eotIds);
      const store = openExisting(opts.db);
      try {
        try {
          opts.session = resolveSession(store, { session: opts.session, task: opts.task, sample: opts.sample });
        } catch (error) {
          // A session that is not there is a failed lookup (exit 1); an ambiguous or incomplete selection is usage (2).
          const message = (error as Error).message;
          throw /^(no session id starts with|unknown task)/.test(message) ? error : new UsageError(message);
        }
        const records = store.completions.listBySession(opts.session);
        if (records.length === 0 && !store.results.get(opts.session)) throw new Error(`session ${opts.session} has no records in ${opts.db}`);
        const { trajectory, source, attempt, evaluated } = trajectoryFor(store, opts.session, records, opts);
        // The status `polar results` shows (CAPTURED for a proxy capture), not the one a trajectory built now carries.
        const status = sessionStatus(store, opts.session);
        const tokenizer = opts.ids ? null : await loadTokenizer(opts.tokenizer);
        if (opts.html !== undefined) {
          const stored = store.results.get(opts.session);
          const decode = (ids: number[]) => (tokenizer ? ids.map((id) => tokenizer.decode([id])) : null);
          writeFileSync(opts.html, sessionHtml({
            session: store.sessions.get(opts.session),
            result: { ...(stored ?? { session_id: opts.session, task_id: trajectory.traces[0]?.metadata.task_id ?? '', status, error: null }), trajectory } as never,
            reward: stored ? evaluatedReward(stored) : null,
            token_texts: trajectory.traces.map((t) => decode(t.response_ids)),
          }));
          console.log(`wrote ${opts.html}: session ${opts.session}, ${trajectory.traces.length} trace(s)`);
          return;
        }
        const color = opts.color === 'always' || (opts.color === 'auto' && process.stdout.isTTY === true);
        const stats = trajectory.metadata.reconstruction_stats;
        console.log(
          `session ${opts.session} [${source}${attemptNote(records, attempt)}]: status ${status}, ${trajectory.traces.length} trace(s) from ` +
            `${stats.completions} completion(s); breaks ${JSON.stringify(stats.breaks)}; ` +
            (stats.chain_roles ? `chains by role ${JSON.stringify(stats.chain_roles)}; dropped ${JSON.stringify(stats.dropped_traces ?? {})}; ` : '') +
            `filter ${JSON.stringify(trajectory.metadata.training_filter)}`,
        );
        trajectory.traces.forEach((t, i) => {
          console.log(renderTrace(t, i, { decode: tokenizer ? (ids) => tokenizer.decode(ids) : undefined, color, showPrompt: opts.prompt, evaluated }));
        });
      } finally {
        store.close();
      }
    });
}

function parseSampleIndex(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--sample must be an integer ≥ 0, got ${JSON.stringify(value)}`);
  return n;
}
