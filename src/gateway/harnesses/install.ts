/**
 * Harness CLI installs: each pinned npm package goes once into `<cache>/<pkg with / → +>@<version>` (the layout of
 * test/support/install-harnesses.ts) with `npm install --prefix`, marked complete by a `.installed` file.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { runProcess } from '../runtimes/process.ts';
import type { HarnessPackage } from './types.ts';

/** Default cache: $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses. */
export function defaultHarnessCache(): string {
  return process.env.POLAR_HARNESS_CACHE ?? join(homedir(), '.cache', 'polar', 'harnesses');
}

/** Install prefix of one pinned package (holds node_modules/.bin). */
export function harnessPrefix(cacheDir: string, pkg: { name: string; version: string }): string {
  return join(cacheDir, `${pkg.name.replace('/', '+')}@${pkg.version}`);
}

/** Paths of an installed package: its bin, node_modules and .bin dir; `installed` false until `.installed` exists. */
export function harnessPaths(cacheDir: string, pkg: HarnessPackage): { prefix: string; bin: string; nodeModules: string; binDir: string; installed: boolean } {
  const prefix = harnessPrefix(cacheDir, pkg);
  const nodeModules = join(prefix, 'node_modules');
  const binDir = join(nodeModules, '.bin');
  return { prefix, nodeModules, binDir, bin: join(binDir, pkg.bin), installed: existsSync(join(prefix, '.installed')) && existsSync(join(binDir, pkg.bin)) };
}

const inFlight = new Map<string, Promise<string>>();

/**
 * Install a harness package (and its companions) unless already installed; concurrent calls share one install.
 * Returns the absolute bin path. Throws Error with npm's stderr tail when npm fails (e.g. no registry access).
 */
export function installHarness(pkg: HarnessPackage, opts: { cacheDir?: string; npm?: string; log?: (line: string) => void } = {}): Promise<string> {
  const cacheDir = opts.cacheDir ?? defaultHarnessCache();
  const paths = harnessPaths(cacheDir, pkg);
  if (paths.installed) return Promise.resolve(paths.bin);
  const pending = inFlight.get(paths.prefix);
  if (pending) return pending;
  const job = (async () => {
    mkdirSync(paths.prefix, { recursive: true });
    const npmInstall = async (specs: string[], env: Record<string, string>) => {
      opts.log?.(`installing ${specs.join(' ')} into ${paths.prefix}`);
      const result = await runProcess([opts.npm ?? 'npm', 'install', '--no-audit', '--no-fund', '--prefix', paths.prefix, ...specs], { env, timeoutMs: 15 * 60_000 });
      if (result.exitCode !== 0) throw new Error(`npm install ${specs.join(' ')} failed (exit ${result.exitCode}): ${result.stderr.trim().slice(-800)}`);
    };
    const env = { ...process.env } as Record<string, string>;
    if (pkg.runtime) {
      // Lifecycle scripts run with PATH's `node`: the runtime must be linked before the CLI's own scripts run.
      await npmInstall([`${pkg.runtime.name}@${pkg.runtime.version}`], env);
      env.PATH = `${paths.binDir}:${env.PATH ?? '/usr/bin:/bin'}`;
    }
    const specs = [pkg, ...(pkg.runtime ? [pkg.runtime] : []), ...(pkg.companions ?? [])].map((p) => `${p.name}@${p.version}`);
    await npmInstall(specs, env);
    if (!existsSync(paths.bin)) throw new Error(`npm install ${specs.join(' ')} did not provide ${paths.bin}`);
    writeFileSync(join(paths.prefix, '.installed'), new Date().toISOString());
    return paths.bin;
  })().finally(() => inFlight.delete(paths.prefix));
  inFlight.set(paths.prefix, job);
  return job;
}
