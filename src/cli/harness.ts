/**
 * `polar harness install NAME|--all [--to DIR]`: install harness adapters' pinned npm packages once into the harness
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
    .description('install harness CLIs into the harness cache (no-op for those already installed); --all --to DIR pre-fills a cache to copy onto an offline GPU box')
    .argument('[name]', `harness: ${Object.keys(HARNESS_ADAPTERS).filter((n) => HARNESS_ADAPTERS[n]!.package).join(', ')}`)
    .option('--all', 'every harness with an npm package')
    .option('--to <dir>', 'cache directory to fill (same as --cache)')
    .option('--cache <dir>', 'cache directory (default: $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses)')
    .action(async (name: string | undefined, opts: { all?: boolean; to?: string; cache?: string }) => {
      if ((name === undefined) === (opts.all !== true)) throw new UsageError('give a harness NAME or --all');
      if (opts.to !== undefined && opts.cache !== undefined && opts.to !== opts.cache) throw new UsageError('--to and --cache name the same directory: give one');
      // --all: each package once (several adapter names may share one).
      const adapters = opts.all
        ? [...new Map(Object.values(HARNESS_ADAPTERS).filter((a) => a.package).map((a) => [`${a.package!.name}@${a.package!.version}`, a])).values()]
        : [HARNESS_ADAPTERS[name!.replaceAll('-', '_')]];
      const adapter = adapters[0];
      if (!adapter) throw new UsageError(`unknown harness ${JSON.stringify(name)}; known: ${Object.keys(HARNESS_ADAPTERS).join(', ')}`);
      if (!adapter.package) throw new UsageError(`harness ${adapter.name} has no package to install`);
      const cacheDir = opts.to ?? opts.cache ?? defaultHarnessCache();
      for (const a of adapters) {
        const pkg = a!.package!;
        const already = harnessPaths(cacheDir, pkg).installed;
        const bin = await installHarness(pkg, { cacheDir, log: (line) => console.error(line) });
        console.log(`${already ? 'already installed' : 'installed'}: ${pkg.name}@${pkg.version} → ${bin}`);
      }
      if (opts.all) console.log(`harness cache: ${cacheDir} (copy it to the same path on the target box, or point $POLAR_HARNESS_CACHE at it)`);
    });
}
