/**
 * `polar harness install NAME [--cache DIR]`: install a harness adapter's pinned npm package once into the harness
 * cache (`<cache>/<pkg>@<version>`, default ~/.cache/polar/harnesses or $POLAR_HARNESS_CACHE).
 */
import type { Command } from 'commander';
import { HARNESS_ADAPTERS } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths, installHarness } from '../gateway/harnesses/install.ts';
import { UsageError } from './common.ts';

export function register(program: Command): void {
  const harness = program.command('harness').description('harness CLIs (pinned npm packages)');
  harness
    .command('install')
    .description('install a harness CLI into the harness cache (no-op when already installed)')
    .argument('<name>', `harness: ${Object.keys(HARNESS_ADAPTERS).filter((n) => HARNESS_ADAPTERS[n]!.package).join(', ')}`)
    .option('--cache <dir>', 'cache directory (default: $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses)')
    .action(async (name: string, opts: { cache?: string }) => {
      const adapter = HARNESS_ADAPTERS[name.replaceAll('-', '_')];
      if (!adapter) throw new UsageError(`unknown harness ${JSON.stringify(name)}; known: ${Object.keys(HARNESS_ADAPTERS).join(', ')}`);
      if (!adapter.package) throw new UsageError(`harness ${adapter.name} has no package to install`);
      const cacheDir = opts.cache ?? defaultHarnessCache();
      const already = harnessPaths(cacheDir, adapter.package).installed;
      const bin = await installHarness(adapter.package, { cacheDir, log: (line) => console.error(line) });
      console.log(`${already ? 'already installed' : 'installed'}: ${adapter.package.name}@${adapter.package.version} → ${bin}`);
    });
}
