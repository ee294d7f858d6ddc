/**
 * Allocator setting of the serving commands. Bun allocates with mimalloc (JavaScriptCore's heap included), and mimalloc
 * hands pages that fall empty back to the OS 100 ms later (Bun's `purge_delay`), and purges holes inside pages it
 * keeps (`purge_holes`). A proxy allocates ~1 MB per 100 KB call (the request, the engine body, the engine's answer
 * with its prompt ids), so under load it took those pages back one page fault at a time: on the project's 2-core box
 * 11–15 minor faults and ~1.1 CPU ms per sequential 100 KB call with Bun's default, 3–6 faults and ~0.8 ms with
 * purging off (bench/README.md#session-7).
 *
 * The serving commands keep freed pages for `PURGE_DELAY` (10 s) and do not purge holes: a busy process reuses its
 * pages long before that (the same CPU and page faults per call as never purging; a finite delay with hole purging
 * left on cost ~10 % CPU at 64 connections), while a process whose load stopped hands the load's peak back to the
 * OS 10–20 s later (100 KB calls at 64 connections: ~290 MB at the end of the load, ~130 MB 15 s later;
 * bench/README.md#session-15).
 *
 * mimalloc reads its options from the environment once, when the process starts, so a serving command (`SERVING`)
 * whose environment does not set `MIMALLOC_PURGE_DELAY` executes itself again (`execve`: the same pid, argv and
 * environment plus `ALLOCATOR_ENV`, each variable the environment does not already set) before anything else runs.
 * Setting `MIMALLOC_PURGE_DELAY` yourself chooses another value and skips the re-execution (`100` is Bun's default,
 * `-1` never hands pages back). Where `execve` is not reachable (no glibc, not Linux) the command runs on with the
 * default.
 * Sources: https://microsoft.github.io/mimalloc/environment.html, https://man7.org/linux/man-pages/man2/execve.2.html
 */
import { readFileSync } from 'node:fs';

/** The commands that serve traffic for a long time (the ones whose per-call cost matters). */
export const SERVING: ReadonlySet<string> = new Set(['proxy', 'gateway', 'serve', 'rollout', 'run', 'train-demo', 'sim']);

/** mimalloc's purge delay for them, ms: freed pages go back to the OS once they have been unused this long. */
export const PURGE_DELAY = '10000';

/** What the re-execution adds to the environment (a variable the environment already sets keeps its value). */
export const ALLOCATOR_ENV: Readonly<Record<string, string>> = { MIMALLOC_PURGE_DELAY: PURGE_DELAY, MIMALLOC_PURGE_HOLES: '0' };

/** Whether `command` re-executes itself: a serving command on Linux whose environment leaves the variable unset. */
export function needsAllocatorSetting(command: string | undefined, env: NodeJS.ProcessEnv, platform: string = process.platform): boolean {
  return command !== undefined && SERVING.has(command) && env.MIMALLOC_PURGE_DELAY === undefined && platform === 'linux';
}

/**
 * Re-execute this process with `MIMALLOC_PURGE_DELAY` set when `needsAllocatorSetting`. Returns only when nothing was
 * done or `execve` failed (then the process runs on as it is).
 */
export function tuneAllocator(command: string | undefined, env: NodeJS.ProcessEnv = process.env): void {
  if (!needsAllocatorSetting(command, env)) return;
  try {
    // Loaded only here: bun:ffi costs nothing to commands that do not re-execute.
    const ffi = require('bun:ffi') as typeof import('bun:ffi');
    const libc = ffi.dlopen('libc.so.6', { execve: { args: [ffi.FFIType.ptr, ffi.FFIType.ptr, ffi.FFIType.ptr], returns: ffi.FFIType.i32 } });
    // The exact argv the process was started with (the kernel's copy), so Bun's own flags and a compiled binary's
    // argv both come through unchanged.
    const argv = readFileSync('/proc/self/cmdline').toString('utf8').split('\0');
    if (argv.at(-1) === '') argv.pop();
    const environment = Object.entries({ ...ALLOCATOR_ENV, ...env }).flatMap(([key, value]) => (value === undefined ? [] : [`${key}=${value}`]));
    const keep: ArrayBufferView[] = []; // referenced until execve returns
    const cString = (text: string) => {
      const bytes = Buffer.from(`${text}\0`, 'utf8');
      keep.push(bytes);
      return ffi.ptr(bytes);
    };
    // A NULL-terminated array of pointers to C strings.
    const table = (items: string[]) => {
      const pointers = new BigUint64Array(items.length + 1);
      items.forEach((item, i) => (pointers[i] = BigInt(cString(item))));
      keep.push(pointers);
      return ffi.ptr(pointers);
    };
    libc.symbols.execve(cString('/proc/self/exe'), table(argv), table(environment));
    // Only reached when execve failed: run on with Bun's default.
    libc.close();
  } catch {
    // No bun:ffi, no glibc or no /proc: run on with Bun's default.
  }
}
