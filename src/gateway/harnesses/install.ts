/**
 * Harness CLI installs: each pinned npm package goes once into `<cache>/<pkg with / → +>@<version>` (the layout of
 * test/support/install-harnesses.ts), marked complete by a `.installed` file. The installer is npm (`npm install
 * --prefix`) when it is on PATH, else the package manager built into this process's own Bun (`bun install` from a
 * pinned package.json, which checks each tarball against the registry's `dist.integrity` and writes bun.lock): a GPU
 * box needs neither Node.js nor npm. JavaScript CLIs run on the host's `node`, or, when there is none, on this
 * process's Bun through a `node` shim (see {@link nodeShimDir}). Sources: https://bun.com/docs/cli/install,
 * https://bun.com/docs/bundler/executables (BUN_BE_BUN).
 */
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, linkSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
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

/**
 * argv prefix and env that run this process's Bun as Bun: the compiled `polar` binary is Bun with BUN_BE_BUN=1, and
 * from source process.execPath is bun itself (where BUN_BE_BUN is ignored).
 */
export function ownBun(): { argv0: string; env: Record<string, string> } {
  return { argv0: process.execPath, env: { BUN_BE_BUN: '1' } };
}

/** Which installer `installHarness` uses: an explicit choice, else npm when on PATH, else this process's Bun. */
export type HarnessInstaller = { kind: 'npm'; npm: string } | { kind: 'bun' };

/**
 * The installer of a harness install: `opts.npm` (an npm path), else `opts.installer` (`polar harness install
 * --installer`), else `$POLAR_HARNESS_INSTALLER` (npm or bun: the choice for installs no flag makes, those of `polar
 * run`, `polar serve` and gateway nodes), else npm when it is on the current PATH, else this process's Bun.
 * @throws Error when $POLAR_HARNESS_INSTALLER is neither npm nor bun, or npm is asked for and not on PATH.
 * Source: src/gateway/harnesses/install.ts.
 */
export function chooseInstaller(opts: { npm?: string; installer?: 'npm' | 'bun' } = {}): HarnessInstaller {
  if (opts.npm) return { kind: 'npm', npm: opts.npm };
  const fromEnv = process.env.POLAR_HARNESS_INSTALLER || undefined;
  if (opts.installer === undefined && fromEnv !== undefined && fromEnv !== 'npm' && fromEnv !== 'bun') {
    throw new Error(`$POLAR_HARNESS_INSTALLER must be npm or bun, got ${JSON.stringify(fromEnv)}`);
  }
  const wanted = opts.installer ?? (fromEnv as 'npm' | 'bun' | undefined);
  if (wanted === 'bun') return { kind: 'bun' };
  const npm = Bun.which('npm', { PATH: process.env.PATH ?? '' });
  if (wanted === 'npm') {
    if (!npm) throw new Error('installer npm was asked for but npm is not on PATH');
    return { kind: 'npm', npm };
  }
  return npm ? { kind: 'npm', npm } : { kind: 'bun' };
}

const inFlight = new Map<string, Promise<string>>();

/**
 * Install a harness package (and its runtime and companions) unless already installed; concurrent calls share one
 * install. Returns the absolute bin path. Throws Error with the installer's stderr tail when it fails (e.g. no
 * registry access) or when the install does not provide the package's bin.
 */
export function installHarness(pkg: HarnessPackage, opts: { cacheDir?: string; npm?: string; installer?: 'npm' | 'bun'; log?: (line: string) => void } = {}): Promise<string> {
  const cacheDir = opts.cacheDir ?? defaultHarnessCache();
  const paths = harnessPaths(cacheDir, pkg);
  if (paths.installed) return Promise.resolve(paths.bin);
  const pending = inFlight.get(paths.prefix);
  if (pending) return pending;
  const job = (async () => {
    const installer = chooseInstaller(opts);
    mkdirSync(paths.prefix, { recursive: true });
    const all = [pkg, ...(pkg.runtime ? [pkg.runtime] : []), ...(pkg.companions ?? [])];
    const specs = all.map((p) => `${p.name}@${p.version}`);
    if (installer.kind === 'bun') {
      // A package.json pinning every package exactly: `bun install` resolves it, verifies each tarball's integrity
      // against the registry metadata and records the resolution in bun.lock next to it.
      // Bun runs no dependency's lifecycle scripts unless trusted: the pinned packages are (Claude Code, OpenCode and
      // Cline place their platform binary in a postinstall script), their own dependencies are not.
      const manifest = {
        name: 'polar-harness', private: true,
        dependencies: Object.fromEntries(all.map((p) => [p.name, p.version])),
        trustedDependencies: all.map((p) => p.name),
      };
      writeFileSync(join(paths.prefix, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
      opts.log?.(`installing ${specs.join(' ')} into ${paths.prefix} (bun install)`);
      const bun = ownBun();
      const result = await runProcess([bun.argv0, 'install', '--no-progress', '--no-summary'], {
        cwd: paths.prefix, env: { ...(process.env as Record<string, string>), ...bun.env }, timeoutMs: 15 * 60_000,
      });
      if (result.exitCode !== 0) throw new Error(`bun install ${specs.join(' ')} failed (exit ${result.exitCode}): ${(result.stderr + result.stdout).trim().slice(-800)}`);
    } else {
      const npmInstall = async (list: string[], env: Record<string, string>) => {
        opts.log?.(`installing ${list.join(' ')} into ${paths.prefix}`);
        const result = await runProcess([installer.npm, 'install', '--no-audit', '--no-fund', '--prefix', paths.prefix, ...list], { env, timeoutMs: 15 * 60_000 });
        if (result.exitCode !== 0) throw new Error(`npm install ${list.join(' ')} failed (exit ${result.exitCode}): ${result.stderr.trim().slice(-800)}`);
      };
      const env = { ...process.env } as Record<string, string>;
      if (pkg.runtime) {
        // Lifecycle scripts run with PATH's `node`: the runtime must be linked before the CLI's own scripts run.
        await npmInstall([`${pkg.runtime.name}@${pkg.runtime.version}`], env);
        env.PATH = `${paths.binDir}:${env.PATH ?? '/usr/bin:/bin'}`;
      }
      await npmInstall(specs, env);
    }
    if (!existsSync(paths.bin)) throw new Error(`installing ${specs.join(' ')} did not provide ${paths.bin}`);
    writeFileSync(join(paths.prefix, '.installed'), new Date().toISOString());
    return paths.bin;
  })().finally(() => inFlight.delete(paths.prefix));
  inFlight.set(paths.prefix, job);
  return job;
}

/**
 * What runs a harness CLI on this host: `native` (a platform binary), `node` (the host's node on PATH, or the
 * package's own `runtime`), `bun` (no node: this process's Bun through the shim), or `node required` (no node and
 * the adapter says Bun cannot stand in: `reason`).
 */
export function harnessRuntime(pkg: HarnessPackage, hostPath = process.env.PATH ?? ''): { runtime: 'native' | 'node' | 'bun' | 'node required'; reason?: string } {
  const js = pkg.js ?? { bun: true };
  if (js === 'native') return { runtime: 'native' };
  if (pkg.runtime || Bun.which('node', { PATH: hostPath })) return { runtime: 'node' };
  if (js.bun === true) return { runtime: 'bun' };
  return { runtime: 'node required', reason: js.bun };
}

/**
 * A directory holding a `node` that runs this process's Bun (BUN_BE_BUN=1), for JavaScript CLIs on a host without
 * node. The directory also holds that Bun executable itself (a hard link, or a copy across file systems): a sandbox
 * binds the harness's tool dirs read-only but not the host path the binary was started from. A preload then drops
 * BUN_BE_BUN from the environment and points process.execPath at the shim: the CLI's own children must not inherit
 * it (a Bun-compiled binary such as Kilo's would act as bun), while a CLI that re-spawns process.execPath (as Gemini
 * CLI does) gets the shim again. It lives in the harness cache (not /tmp, which a sandbox replaces), one per Bun
 * executable (path, size and mtime). Returns null when the CLI does not need it (native, node present, or a `runtime`
 * package); throws Error when the adapter says the CLI does not run on Bun and there is no node.
 */
export function nodeShimDir(cacheDir: string, pkg: HarnessPackage, hostPath = process.env.PATH ?? ''): string | null {
  const { runtime, reason } = harnessRuntime(pkg, hostPath);
  if (runtime === 'node required') throw new Error(`harness ${pkg.name} needs node on PATH: it does not run on Bun (${reason})`);
  if (runtime !== 'bun') return null;
  const bun = ownBun();
  const st = statSync(bun.argv0);
  const dir = join(cacheDir, '.node-on-bun', createHash('sha256').update(`v3\0${bun.argv0}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 16));
  const shim = join(dir, 'node');
  if (!existsSync(shim)) {
    mkdirSync(dir, { recursive: true });
    const exe = join(dir, 'bun');
    const tmpExe = `${exe}.${process.pid}`;
    try {
      linkSync(bun.argv0, tmpExe);
    } catch {
      copyFileSync(bun.argv0, tmpExe);
      chmodSync(tmpExe, 0o755);
    }
    renameSync(tmpExe, exe);
    const q = (v: string) => `'${v.replaceAll("'", `'\\''`)}'`;
    const preload = join(dir, 'preload.cjs');
    writeFileSync(`${preload}.${process.pid}`, `delete process.env.BUN_BE_BUN;\nprocess.execPath = ${JSON.stringify(shim)};\n`);
    renameSync(`${preload}.${process.pid}`, preload);
    const tmp = `${shim}.${process.pid}`;
    writeFileSync(tmp, `#!/bin/sh\n# node for JavaScript harness CLIs on a host without it: polar's own Bun.\nBUN_BE_BUN=1 exec ${q(exe)} --preload ${q(preload)} "$@"\n`, { mode: 0o755 });
    renameSync(tmp, shim);
  }
  return dir;
}
