/**
 * `polar config check FILE`: print the resolved config (defaults filled, secrets redacted) or every error as
 * `path: message` on stderr with exit 2. `polar config docs`: print the Markdown reference (docs/config.md).
 */
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { renderConfigDocs } from '../config/docs.ts';
import { ConfigError, formatIssue, loadConfig, redactConfig } from '../config/load.ts';
import { EXIT_USAGE } from './common.ts';

export function register(program: Command): void {
  const config = program.command('config').description('check and document the topology file');
  config
    .command('check')
    .description('validate a config file (YAML or JSON) and print it resolved, with defaults filled and secrets redacted')
    .argument('<file>', 'config file')
    .option('--json', 'print the resolved config as JSON instead of YAML')
    .action((file: string, opts: { json?: boolean }) => {
      let resolved;
      try {
        resolved = redactConfig(loadConfig(file));
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        console.error(`polar: invalid config ${file}:`);
        for (const issue of error.issues) console.error(`  ${formatIssue(issue)}`);
        process.exit(EXIT_USAGE);
      }
      process.stdout.write(opts.json ? `${JSON.stringify(resolved, null, 2)}\n` : stringify(resolved, { lineWidth: 0 }));
    });
  config
    .command('docs')
    .description('print the config reference (Markdown) rendered from the schema; the source of docs/config.md')
    .action(() => {
      process.stdout.write(renderConfigDocs());
    });
}
