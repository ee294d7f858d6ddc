/**
 * `polar export --db FILE --format jsonl|parquet|messages --out PATH`: trainer rows (one trace per line/row with
 * prompt_ids, response_ids, loss_mask, response_logprobs, reward, advantage, metadata) or the accepted-sessions
 * dataset in OpenAI messages form.
 */
import type { Command } from 'commander';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { acceptedMessages, exportRows, writeJsonl, writeMessages, writeParquet } from '../rollout/export.ts';
import { openStore } from '../store/index.ts';
import { UsageError } from './common.ts';

const FORMATS = ['jsonl', 'parquet', 'messages'] as const;

export function register(program: Command): void {
  program
    .command('export')
    .description('export a results database: traces as JSONL or Parquet, or accepted sessions as OpenAI messages')
    .requiredOption('--db <file>', 'SQLite results file')
    .requiredOption('--format <format>', 'jsonl, parquet or messages')
    .requiredOption('--out <path>', 'output file')
    .action((opts: { db: string; format: string; out: string }) => {
      if (!(FORMATS as readonly string[]).includes(opts.format)) throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, got ${JSON.stringify(opts.format)}`);
      if (!existsSync(opts.db)) throw new UsageError(`no such database: ${opts.db}`);
      const store = openStore(opts.db);
      try {
        mkdirSync(dirname(opts.out), { recursive: true });
        const n =
          opts.format === 'messages'
            ? writeMessages(acceptedMessages(store), opts.out)
            : opts.format === 'parquet'
              ? writeParquet(exportRows(store), opts.out)
              : writeJsonl(exportRows(store), opts.out);
        console.log(`wrote ${n} ${opts.format === 'messages' ? 'sessions' : 'traces'} to ${opts.out}`);
      } finally {
        store.close();
      }
    });
}
