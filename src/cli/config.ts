/**
 * `polar config check FILE`: print the resolved config (defaults filled, secrets redacted) or every error as
 * `path: message` on stderr with exit 2. `polar config docs`: print the Markdown reference (docs/config.md).
 * `polar config import FILE`: convert a Python Polar topology into this config (src/config/import-reference.ts).
 */
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { readFileSync, writeFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { renderConfigDocs } from '../config/docs.ts';
import { importReferenceTopology, ReferenceTopologyError } from '../config/import-reference.ts';
import { ConfigError, formatIssue, loadConfig, redactConfig, resolveConfig } from '../config/load.ts';
import { EXIT_USAGE, referenceHint, UsageError } from './common.ts';

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
        const hint = referenceHint(file);
        if (hint) console.error(hint.trimStart());
        process.exit(EXIT_USAGE);
      }
      process.stdout.write(opts.json ? `${JSON.stringify(resolved, null, 2)}\n` : stringify(resolved, { lineWidth: 0 }));
    });
  config
    .command('import')
    .description("convert a Python Polar topology (ProRL-Agent-Server TopologyConfig YAML) into this config; notes on stderr name every key left out")
    .argument('<file>', 'reference topology file (YAML or JSON)')
    .option('-o, --output <file>', 'write the converted config here instead of stdout')
    .option('--json', 'print JSON instead of YAML')
    .action((file: string, opts: { output?: string; json?: boolean }) => {
      let raw: unknown;
      try {
        raw = parseYaml(readFileSync(file, 'utf8'));
      } catch (error) {
        throw new UsageError(`${file}: cannot read: ${(error as Error).message}`);
      }
      let imported;
      try {
        imported = importReferenceTopology(raw);
        resolveConfig(imported.config, { env: {} }); // our strict schema must accept what we write
      } catch (error) {
        if (error instanceof ReferenceTopologyError) throw new UsageError(`${file}: ${error.message}`);
        if (error instanceof ConfigError) throw new UsageError(`${file}: converted config is invalid:\n  ${error.issues.map(formatIssue).join('\n  ')}`);
        throw error;
      }
      for (const note of imported.notes) console.error(`polar config import: note: ${note}`);
      const text = opts.json ? `${JSON.stringify(imported.config, null, 2)}\n` : `# converted by polar config import from ${file}\n${stringify(imported.config, { lineWidth: 0 })}`;
      if (opts.output) writeFileSync(opts.output, text);
      else process.stdout.write(text);
    });
  config
    .command('docs')
    .description('print the config reference (Markdown) rendered from the schema; the source of docs/config.md')
    .action(() => {
      process.stdout.write(renderConfigDocs());
    });
}
