/**
 * `polar export --db FILE --format jsonl|parquet|messages --out PATH [--builder NAME] [--only-evaluated]
 * [--include-unevaluated]`: trainer rows (one trace per line/row with prompt_ids, response_ids, loss_mask,
 * response_logprobs, finish_reason {unified, raw}, prompt_messages, response_messages, tools (OpenAI Chat shape),
 * reward, advantage, metadata incl. trajectory_status, training_filter, reconstruction_stats, evaluation; Parquet adds
 * string columns finish_reason (unified), finish_reason_raw, group_id, session_id, task_id, status) or the
 * accepted-sessions dataset in OpenAI messages form. Field list: src/rollout/export.ts `ExportRow`, `writeParquet`.
 * Sessions with records but no SessionResult (a `polar proxy` capture) are built from their records with --builder (jsonl
 * and parquet; refused with messages, whose rows no builder shapes) and
 * exported with `reward: null` and `metadata.evaluated: false`, unless --only-evaluated; in messages form they are
 * included only with --include-unevaluated. Prints how many evaluated and unevaluated sessions went in.
 * A `polar run --max-retries` retry is folded into the task it re-ran: its rows carry the task's task_id, group_id
 * and sample_index (metadata.session_task_id names the retry), advantages are over the task's samples by their last
 * attempts, and the failed attempts it replaced are left out (counted on stderr); src/rollout/run-retries.ts finalGroups.
 */
import type { Command } from 'commander';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { BuilderName } from '../core/records.ts';
import { acceptedMessages, exportTraces, unevaluatedSessionIds, writeJsonl, writeMessages, writeParquet } from '../rollout/export.ts';
import { openStore } from '../store/index.ts';
import { BUILDER_NAMES } from '../trace/index.ts';
import { refuseGivenFlags, UsageError } from './common.ts';

const FORMATS = ['jsonl', 'parquet', 'messages'] as const;

interface ExportFlags {
  db: string;
  format: string;
  out: string;
  builder: string;
  onlyEvaluated?: boolean;
  includeUnevaluated?: boolean;
}

export function register(program: Command): void {
  program
    .command('export')
    .description('export a results database: traces as JSONL or Parquet, or accepted sessions as OpenAI messages')
    .requiredOption('--db <file>', 'SQLite results file')
    .requiredOption('--format <format>', 'jsonl, parquet or messages')
    .requiredOption('--out <path>', 'output file')
    .option('--builder <name>', `jsonl/parquet: builder for sessions without an evaluation (${BUILDER_NAMES.join('|')})`, 'prefix_merging')
    .option('--only-evaluated', 'jsonl/parquet: only sessions with a stored result (leave out unevaluated captures)')
    .option('--include-unevaluated', 'messages: also sessions without an evaluation (reward null, evaluated false)')
    .action((opts: ExportFlags, command: Command) => {
      if (!(FORMATS as readonly string[]).includes(opts.format)) throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, got ${JSON.stringify(opts.format)}`);
      if (!(BUILDER_NAMES as string[]).includes(opts.builder)) throw new UsageError(`--builder must be one of ${BUILDER_NAMES.join('|')}, got ${JSON.stringify(opts.builder)}`);
      if (opts.onlyEvaluated && opts.includeUnevaluated) throw new UsageError('--only-evaluated and --include-unevaluated contradict each other');
      if (opts.format === 'messages' && opts.onlyEvaluated) {
        throw new UsageError('--only-evaluated applies to jsonl and parquet; --format messages holds only evaluated sessions unless --include-unevaluated');
      }
      if (opts.format === 'messages') {
        refuseGivenFlags(command, [['builder', '--builder']], 'to --format jsonl and parquet; a --format messages row is the session\'s main-thread conversation, which no trajectory builder shapes');
      }
      if (opts.format !== 'messages' && opts.includeUnevaluated) {
        throw new UsageError('--include-unevaluated applies to --format messages; jsonl and parquet include unevaluated sessions unless --only-evaluated');
      }
      if (!existsSync(opts.db)) throw new UsageError(`no such database: ${opts.db}`);
      const store = openStore(opts.db);
      try {
        mkdirSync(dirname(opts.out), { recursive: true });
        if (opts.format === 'messages') {
          const rows = acceptedMessages(store, { includeUnevaluated: opts.includeUnevaluated === true });
          const n = writeMessages(rows, opts.out);
          const unevaluated = rows.filter((r) => !r.metadata.evaluated).length;
          const waiting = opts.includeUnevaluated ? 0 : unevaluatedSessionIds(store).length;
          console.log(`wrote ${n} sessions to ${opts.out} (${n - unevaluated} accepted evaluated, ${unevaluated} unevaluated)`);
          if (waiting > 0) console.error(`polar export: ${waiting} unevaluated session(s) left out; pass --include-unevaluated to add them with reward null`);
          return;
        }
        const result = exportTraces(store, { builder: opts.builder as BuilderName, onlyEvaluated: opts.onlyEvaluated === true });
        const n = opts.format === 'parquet' ? writeParquet(result.rows, opts.out) : writeJsonl(result.rows, opts.out);
        console.log(`wrote ${n} traces to ${opts.out} (sessions: ${result.evaluatedSessions} evaluated, ${result.unevaluatedSessions} unevaluated)`);
        if (result.unevaluatedSessions > 0) {
          console.error(`polar export: ${result.unevaluatedSessions} session(s) have no evaluation: their traces were built with ${opts.builder} and have reward null, metadata.evaluated false`);
        }
        if (result.skippedUnevaluated > 0) console.error(`polar export: --only-evaluated left out ${result.skippedUnevaluated} unevaluated session(s)`);
        if (result.replacedSessions > 0) {
          console.error(`polar export: ${result.replacedSessions} session(s) re-run by a retry left out (infrastructure failures of polar run --max-retries); each retry's rows stand in for them, with the task_id, sample_index and group of the sample it re-ran`);
        }
      } finally {
        store.close();
      }
    });
}
