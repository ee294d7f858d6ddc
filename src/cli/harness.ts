/**
 * `polar harness install NAME... [--cache DIR] [--installer npm|bun]`: install harness adapters' pinned npm packages
 * once into the harness cache (`<cache>/<pkg>@<version>`, default ~/.cache/polar/harnesses or $POLAR_HARNESS_CACHE),
 * with npm when on PATH, else with the Bun built into this binary. `--all --to DIR` pre-fills a cache with every
 * packaged harness (each package once) to copy onto an offline box.
 * `polar harness install --from FILE`: install every harness in a pack (checksums verified), no network needed.
 * `polar harness pack NAME... --out FILE`: write installed harnesses (installing them first) to a `.tar.zst` pack.
 */
import type { Command } from 'commander';
import { HARNESS_ADAPTERS } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths, harnessRuntime, installHarness } from '../gateway/harnesses/install.ts';
import { installPack, packHarnesses } from '../gateway/harnesses/pack.ts';
import type { HarnessPackage } from '../gateway/harnesses/types.ts';
import { UsageError } from './common.ts';

function harnessPackage(name: string): { adapter: string; pkg: HarnessPackage } {
  const adapter = HARNESS_ADAPTERS[name.replaceAll('-', '_')];
  if (!adapter) throw new UsageError(`unknown harness ${JSON.stringify(name)}; known: ${Object.keys(HARNESS_ADAPTERS).join(', ')}`);
  if (!adapter.package) throw new UsageError(`harness ${adapter.name} has no package to install`);
  return { adapter: adapter.name, pkg: adapter.package };
}

function parseInstaller(value: string | undefined): 'npm' | 'bun' | undefined {
  if (value === undefined || value === 'npm' || value === 'bun') return value;
  throw new UsageError(`--installer must be npm or bun, got ${JSON.stringify(value)}`);
}

export function register(program: Command): void {
  const harness = program.command('harness').description('harness CLIs (pinned npm packages)');
  const packaged = Object.keys(HARNESS_ADAPTERS).filter((n) => HARNESS_ADAPTERS[n]!.package).join(', ');
  harness
    .command('install')
    .description('install harness CLIs into the harness cache (no-op when already installed), from the registry or --from a pack; --all --to DIR pre-fills a cache to copy onto an offline GPU box')
    .argument('[names...]', `harnesses: ${packaged}`)
    .option('--all', 'every harness with an npm package (each package once)')
    .option('--to <dir>', 'cache directory to fill (same as --cache)')
    .option('--cache <dir>', 'cache directory (default: $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses)')
    .option('--installer <kind>', 'npm or bun (default: $POLAR_HARNESS_INSTALLER, else npm when on PATH, else the Bun built into polar)')
    .option('--from <file>', 'install from a pack written by `polar harness pack` (offline; checksums verified)')
    .action(async (names: string[], opts: { all?: boolean; to?: string; cache?: string; installer?: string; from?: string }) => {
      if (opts.to !== undefined && opts.cache !== undefined && opts.to !== opts.cache) throw new UsageError('--to and --cache name the same directory: give one');
      const cacheDir = opts.to ?? opts.cache ?? defaultHarnessCache();
      const installer = parseInstaller(opts.installer);
      if (opts.from) {
        if (names.length) throw new UsageError('give either harness names or --from, not both');
        if (opts.all) throw new UsageError('give either --all or --from, not both');
        if (opts.installer !== undefined) throw new UsageError('--installer applies to installs from the registry; an install --from a pack runs no installer');
        for (const r of await installPack(opts.from, cacheDir)) console.log(`${r.status}: ${r.name}@${r.version} (from ${opts.from})`);
        return;
      }
      if (names.length > 0 && opts.all) throw new UsageError('give a harness NAME or --all');
      if (!names.length && !opts.all) throw new UsageError('name a harness to install (or --all), or --from a pack');
      // --all: each package once (several adapter names may share one).
      const pkgs = opts.all
        ? [...new Map(Object.values(HARNESS_ADAPTERS).filter((a) => a.package).map((a) => [`${a.package!.name}@${a.package!.version}`, a.package!])).values()]
        : names.map((name) => harnessPackage(name).pkg);
      for (const pkg of pkgs) {
        const already = harnessPaths(cacheDir, pkg).installed;
        const bin = await installHarness(pkg, { cacheDir, installer, log: (line) => console.error(line) });
        console.log(`${already ? 'already installed' : 'installed'}: ${pkg.name}@${pkg.version} → ${bin} (runs on ${harnessRuntime(pkg).runtime})`);
      }
      if (opts.all) console.log(`harness cache: ${cacheDir} (copy it to the same path on the target box, or point $POLAR_HARNESS_CACHE at it)`);
    });
  harness
    .command('pack')
    .description('write harness installs (installed first when missing) to one .tar.zst for `polar harness install --from`')
    .argument('<names...>', `harnesses: ${packaged}`)
    .requiredOption('--out <file>', 'output file, e.g. harnesses.tar.zst')
    .option('--cache <dir>', 'cache directory (default: $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses)')
    .option('--installer <kind>', 'npm or bun, for harnesses not yet installed')
    .action(async (names: string[], opts: { out: string; cache?: string; installer?: string }) => {
      const cacheDir = opts.cache ?? defaultHarnessCache();
      const installer = parseInstaller(opts.installer);
      const pkgs = names.map((n) => harnessPackage(n).pkg);
      for (const pkg of pkgs) await installHarness(pkg, { cacheDir, installer, log: (line) => console.error(line) });
      const manifest = await packHarnesses(pkgs, cacheDir, opts.out);
      console.log(`packed ${manifest.packages.map((p) => `${p.name}@${p.version}`).join(', ')} (${Object.keys(manifest.files).length} files) → ${opts.out}`);
    });
}
