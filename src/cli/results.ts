/**
 * `polar results --db FILE`: the store's sessions as a table (task, sample, session id prefix, status, reward, turns,
 * completions, chains, trainable tokens, re-rendered joins, duration, error), filterable, or as JSON rows.
 * Rows: src/observe/results.ts.
 */
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { formatResultTable, resultRows } from '../observe/results.ts';
import { openStore } from '../store/index.ts';
import { UsageError } from './common.ts';
import { SESSION_STATUSES } from '../core/contracts/session.ts';

/** Statuses a results row can have: a session's, a cancelled one's (rollout server), CAPTURED (records without a task). */
const RESULT_STATUSES: readonly string[] = [...SESSION_STATUSES, 'CANCELLED', 'CAPTURED'];

export function register(program: Command): void {
  program
    .command('results')
    .description('list the tasks and sessions of a store: reward, turns, chains, trainable tokens, errors')
    .requiredOption('--db <file>', 'SQLite store written by polar')
    .option('--task <id>', 'only sessions of tasks whose id starts with this')
    .option('--status <status>', 'only sessions with this status, any case (COMPLETED, ERROR, TIMEOUT, CANCELLED, RUNNING, CAPTURED, …)')
    .option('--failed', 'only sessions that did not complete')
    .option('--json', 'print the rows as a JSON array')
    .action((opts: { db: string; task?: string; status?: string; failed?: boolean; json?: boolean }) => {
      if (opts.status !== undefined && !RESULT_STATUSES.includes(opts.status.toUpperCase())) {
        throw new UsageError(`--status ${opts.status}: not a session status; one of ${RESULT_STATUSES.join(', ')}`);
      }
      if (opts.db !== ':memory:' && !existsSync(opts.db)) throw new UsageError(`--db ${opts.db}: no such file`);
      const store = openStore(opts.db);
      try {
        const filter = { task: opts.task, status: opts.status, failed: opts.failed };
        const rows = resultRows(store, filter);
        // An empty selection under a filter is not an empty store: say how many sessions the filter left out.
        const filtered = rows.length === 0 && !opts.json ? { filter, total: resultRows(store).length } : undefined;
        console.log(opts.json ? JSON.stringify(rows, null, 2) : formatResultTable(rows, Math.max(100, process.stdout.columns ?? 100), filtered));
      } finally {
        store.close();
      }
    });
}
