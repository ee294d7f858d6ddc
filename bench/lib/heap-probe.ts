/**
 * A preload for a benchmarked server process (`bun --preload bench/lib/heap-probe.ts …`): on SIGUSR2 it runs a full,
 * synchronous garbage collection and writes what is still alive to `$POLAR_BENCH_HEAP_OUT` as one JSON object:
 * `heapMB` (JavaScriptCore's live heap after the collection, MB), `externalMB` (memory the heap's objects hold
 * outside it, such as ArrayBuffer contents, MB), `objects` (live cell count) and `types` (live count per object type,
 * e.g. `{"Object": 99969, "string": 27391}`), written to a temporary file and renamed, so a reader never sees half.
 * bench/proxy-soak.ts `--heap` reads it every sample to tell a leak (live objects that keep growing) from the
 * allocator keeping freed memory (RSS that grows while the live heap does not).
 * Source: https://bun.sh/docs/project/benchmarking#measuring-memory-usage (`bun:jsc` heapStats, `Bun.gc(true)`).
 */
import { heapStats } from 'bun:jsc';
import { renameSync, writeFileSync } from 'node:fs';

const out = process.env.POLAR_BENCH_HEAP_OUT;
if (!out) throw new Error('bench/lib/heap-probe.ts needs POLAR_BENCH_HEAP_OUT (the JSON file to write on SIGUSR2)');

process.on('SIGUSR2', () => {
  Bun.gc(true);
  const stats = heapStats();
  const snapshot = { heapMB: stats.heapSize / 2 ** 20, externalMB: stats.extraMemorySize / 2 ** 20, objects: stats.objectCount, types: stats.objectTypeCounts };
  writeFileSync(`${out}.tmp`, JSON.stringify(snapshot));
  renameSync(`${out}.tmp`, out);
});
