/**
 * Installs the pinned harness CLIs the end-to-end tests use into the harness cache (outside the repo), once, with the
 * product's own installer (`polar harness install`: same pins, same companions, same layout). Runs before the test
 * suite enters its loopback-only namespace, where the registry is out of reach.
 */
import { HARNESS_ADAPTERS } from '../../src/gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths, installHarness } from '../../src/gateway/harnesses/install.ts';

export const HARNESS_CACHE = defaultHarnessCache();

/**
 * Adapters whose CLI no test in `npm test` runs, so it is not installed here: OpenClaw (836 MB with its Node 24, about
 * 3 minutes to install and 3 minutes per session on a 2-core machine). scripts/harness-matrix.sh runs it.
 */
export const NOT_INSTALLED_FOR_NPM_TEST: readonly string[] = ['openclaw'];

/** npm package → pinned version of every harness adapter's CLI (the e2e tests run these). */
export const HARNESS_CLIS: Record<string, string> = Object.fromEntries(
  Object.values(HARNESS_ADAPTERS).flatMap((adapter) => (adapter.package && !NOT_INSTALLED_FOR_NPM_TEST.includes(adapter.name) ? [[adapter.package.name, adapter.package.version]] : [])),
);

/** Path of a CLI's bin in the cache, or null when it is not installed. */
export function harnessBin(pkg: string, version: string, bin: string): string | null {
  const paths = harnessPaths(HARNESS_CACHE, { name: pkg, version, bin });
  return paths.installed ? paths.bin : null;
}

if (import.meta.main) {
  let failed = false;
  for (const [name, adapter] of Object.entries(HARNESS_ADAPTERS)) {
    if (!adapter.package || NOT_INSTALLED_FOR_NPM_TEST.includes(name)) continue;
    try {
      await installHarness(adapter.package, { cacheDir: HARNESS_CACHE, log: (line) => console.log(`${name}: ${line}`) });
    } catch (error) {
      failed = true;
      console.error(`${name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  process.exit(failed ? 1 : 0);
}
