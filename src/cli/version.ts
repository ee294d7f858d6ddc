import type { Command } from 'commander';
import { existsSync } from 'node:fs';

declare const POLAR_GIT_COMMIT: string | undefined;
declare const POLAR_VERSION: string | undefined;

/** Version info; the build injects POLAR_VERSION and POLAR_GIT_COMMIT with --define. */
export function versionInfo(): { version: string; commit: string; bun: string } {
  const version = typeof POLAR_VERSION === 'string' ? POLAR_VERSION : (require('../../package.json') as { version: string }).version;
  let commit = typeof POLAR_GIT_COMMIT === 'string' ? POLAR_GIT_COMMIT : 'unknown';
  // From source, ask git. A binary built without scripts/build.ts has no commit defined, and its import.meta.dir
  // exists only inside the binary (spawning there throws ENOENT), so it reports "unknown".
  if (commit === 'unknown' && existsSync(import.meta.dir)) {
    try {
      const git = Bun.spawnSync(['git', 'rev-parse', '--short=12', 'HEAD'], { stderr: 'ignore', cwd: import.meta.dir });
      if (git.exitCode === 0) commit = `${git.stdout.toString().trim()}-dev`;
    } catch {
      // no git on this machine
    }
  }
  return { version, commit, bun: Bun.version };
}

export function register(program: Command): void {
  program
    .command('version')
    .description('print the version, git commit and Bun version')
    .option('--json', 'print as JSON')
    .action((opts: { json?: boolean }) => {
      const info = versionInfo();
      if (opts.json) console.log(JSON.stringify(info));
      else console.log(`polar ${info.version} (commit ${info.commit}, bun ${info.bun})`);
    });
}
