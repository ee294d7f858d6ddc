import type { Command } from 'commander';

declare const POLAR_GIT_COMMIT: string | undefined;
declare const POLAR_VERSION: string | undefined;

/** Version info; the build injects POLAR_VERSION and POLAR_GIT_COMMIT with --define. */
export function versionInfo(): { version: string; commit: string; bun: string } {
  const version = typeof POLAR_VERSION === 'string' ? POLAR_VERSION : (require('../../package.json') as { version: string }).version;
  let commit = typeof POLAR_GIT_COMMIT === 'string' ? POLAR_GIT_COMMIT : 'unknown';
  if (commit === 'unknown') {
    const git = Bun.spawnSync(['git', 'rev-parse', '--short=12', 'HEAD'], { stderr: 'ignore', cwd: import.meta.dir });
    if (git.exitCode === 0) commit = `${git.stdout.toString().trim()}-dev`;
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
