/**
 * `polar examples [DIR]`: write the repository's examples/ (task directories with their simulator scripts, Harbor
 * tasks, the closed-loop trainer, configs, the systemd unit, …) into DIR (default `./examples`), from the copies
 * embedded in the binary (src/examples/manifest.ts), so every README command that names `examples/` works next to a
 * lone `dist/polar`. Existing files are kept unless `--force`; exits 1 when some were kept, naming them.
 */
import type { Command } from 'commander';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { EXAMPLE_EXECUTABLES, EXAMPLE_FILES } from '../examples/manifest.ts';
import { EXIT_FAILED } from './common.ts';

/**
 * Write the embedded examples under `dir`.
 * @returns the paths written and the ones left as they were (relative to `dir`)
 */
export async function writeExamples(dir: string, opts: { force?: boolean } = {}): Promise<{ written: string[]; kept: string[] }> {
  const written: string[] = [];
  const kept: string[] = [];
  for (const [name, source] of Object.entries(EXAMPLE_FILES)) {
    const target = join(dir, name);
    if (existsSync(target) && !opts.force) {
      kept.push(name);
      continue;
    }
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, new Uint8Array(await Bun.file(source).arrayBuffer()));
    if (EXAMPLE_EXECUTABLES.has(name)) chmodSync(target, 0o755);
    written.push(name);
  }
  return { written, kept };
}

export function register(program: Command): void {
  program
    .command('examples')
    .description('write the bundled examples (tasks, Harbor tasks, configs, the closed-loop trainer, the systemd unit) into DIR, for the README commands that name examples/')
    .argument('[dir]', 'where to write them', 'examples')
    .option('--force', 'overwrite files that already exist')
    .action(async (dir: string, opts: { force?: boolean }) => {
      const { written, kept } = await writeExamples(resolve(dir), opts);
      console.log(`polar examples: wrote ${written.length} file(s) under ${resolve(dir)}`);
      if (kept.length > 0) {
        console.error(`polar examples: kept ${kept.length} existing file(s) (--force overwrites them): ${kept.slice(0, 5).join(', ')}${kept.length > 5 ? ', …' : ''}`);
        process.exitCode = EXIT_FAILED;
      }
    });
}
