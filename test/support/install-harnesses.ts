/**
 * Installs the pinned harness CLIs the end-to-end tests use into the harness cache (outside the repo), once.
 * Runs before the test suite enters its loopback-only namespace. Engineers add a CLI by adding a line to HARNESS_CLIS.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const HARNESS_CACHE = process.env.POLAR_HARNESS_CACHE ?? join(process.env.HOME ?? '/root', '.cache', 'polar', 'harnesses');

/** npm package → pinned version, the CLIs the e2e tests run. */
export const HARNESS_CLIS: Record<string, string> = {
  '@mariozechner/pi-coding-agent': '0.73.1',
  '@anthropic-ai/claude-code': '2.1.197',
  '@qwen-code/qwen-code': '0.15.10',
  '@openai/codex': '0.171.0',
  '@google/gemini-cli': '0.61.0',
};

/** Directory holding node_modules/.bin for one pinned CLI. */
export function harnessPrefix(pkg: string, version: string): string {
  return join(HARNESS_CACHE, `${pkg.replace('/', '+')}@${version}`);
}

/** Path of a CLI's bin inside its prefix, or null when not installed. */
export function harnessBin(pkg: string, version: string, bin: string): string | null {
  const path = join(harnessPrefix(pkg, version), 'node_modules', '.bin', bin);
  return existsSync(path) ? path : null;
}

if (import.meta.main) {
  for (const [pkg, version] of Object.entries(HARNESS_CLIS)) {
    const prefix = harnessPrefix(pkg, version);
    if (existsSync(join(prefix, '.installed'))) continue;
    mkdirSync(prefix, { recursive: true });
    console.log(`installing ${pkg}@${version} into ${prefix}`);
    const proc = Bun.spawnSync(['npm', 'install', '--no-audit', '--no-fund', '--prefix', prefix, `${pkg}@${version}`], { stdout: 'inherit', stderr: 'inherit' });
    if (proc.exitCode !== 0) process.exit(1);
    await Bun.write(join(prefix, '.installed'), new Date().toISOString());
  }
}
