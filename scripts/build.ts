/**
 * Builds the single binary: `bun build --compile src/main.ts` → dist/polar. Files needed at run time (the
 * simulator's default tokenizer and chat template) are embedded through `import ... with { type: 'file' }` in the
 * source, so the binary alone works on another machine.
 */
import { $ } from 'bun';
import pkg from '../package.json';

const root = new URL('..', import.meta.url).pathname;
const commit = (await $`git rev-parse --short=12 HEAD`.cwd(root).nothrow().quiet()).stdout.toString().trim() || 'unknown';
const dirty = (await $`git status --porcelain`.cwd(root).nothrow().quiet()).stdout.toString().trim() ? '-dirty' : '';
const target = process.env.POLAR_BUILD_TARGET; // e.g. bun-linux-x64 for cross-builds
const result = await Bun.build({
  entrypoints: [`${root}src/main.ts`],
  compile: { outfile: `${root}dist/polar`, ...(target ? { target: target as 'bun-linux-x64' } : {}) },
  minify: true,
  sourcemap: 'linked',
  define: { POLAR_GIT_COMMIT: JSON.stringify(commit + dirty), POLAR_VERSION: JSON.stringify(pkg.version) },
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
console.log(`built dist/polar (${commit}${dirty})`);
