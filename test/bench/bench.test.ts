/**
 * Smoke tests of the benchmark infrastructure: the runner's table parsing and aggregation, percentiles, and one
 * real benchmark variant run through the bench protocol at its smallest size. No timing assertions: benchmarks
 * print numbers, they never pass or fail on time.
 */
import { expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aggregate, mergeSameShape, parseTextTable } from '../../bench/run.ts';
import { RESULT_MARK } from '../../bench/lib/bench.ts';
import { runLoad } from '../../bench/lib/load.ts';
import { splitThreads, threadCpuMs, treeMinorFaults } from '../../bench/lib/proc.ts';
import { median, percentile, spread } from '../../bench/lib/stats.ts';
import { renderMarkdown, type BenchTable } from '../../bench/lib/table.ts';

test('percentile uses nearest rank and median averages the middle pair', () => {
  const samples = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
  expect(percentile(samples, 50)).toBe(5);
  expect(percentile(samples, 99)).toBe(10);
  expect(percentile(samples, 0)).toBe(1);
  expect(median(samples)).toBe(5.5);
  expect(Number.isNaN(percentile([], 50))).toBe(true);
  expect(() => percentile(samples, 101)).toThrow(RangeError);
  expect(spread([3, Number.NaN, 1, 2])).toEqual({ median: 2, min: 1, max: 3, n: 3 });
});

test('the runner parses a printed table and reports median (min–max) per cell across repeats', () => {
  const printed = (ms: string) => `trajectory builders\nturns  builder  build ms  tok/s\n    8  per_request  ${ms}  12M\n`;
  const runs = ['30', '10', '20'].map((ms) => parseTextTable(printed(ms)));
  expect(runs[0]!.columns).toEqual(['turns', 'builder', 'build ms', 'tok/s']);
  const merged = aggregate(runs);
  expect(merged.rows[0]).toEqual(['8', 'per_request', '20 (10–30)', '12M']);
  expect(() => parseTextTable('no table here')).toThrow('no table');
  const markdown = parseTextTable('proxy\n| contender | p50 ms |\n|---|---:|\n| direct | 0.64 |\n| proxy | 4.34 |\nrecords: 3');
  expect(markdown.columns).toEqual(['contender', 'p50 ms']);
  expect(markdown.rows).toEqual([['direct', '0.64'], ['proxy', '4.34']]);
});

test('aggregate keeps key columns and renders numbers of repeated runs as markdown', () => {
  const run = (rps: number): BenchTable => ({ title: 't', columns: ['contender', 'req/s'], rows: [['ours', rps]], keyColumns: 1 });
  const merged = aggregate([run(100), run(300), run(200)]);
  expect(merged.rows[0]).toEqual(['ours', '200 (100–300)']);
  expect(renderMarkdown(merged.columns, merged.rows)).toContain('| ours | 200 (100–300) |');
});

test('a benchmark variant runs in its own process and hands the runner a table', async () => {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, '../../bench/tokenization.ts'), '--variant', '8k', '--quick'], { stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  console.log(stdout.split('\n').filter((l) => !l.startsWith(RESULT_MARK)).join('\n'));
  const line = stdout.split('\n').find((l) => l.startsWith(RESULT_MARK));
  expect(line).toBeDefined();
  const table = JSON.parse(line!.slice(RESULT_MARK.length)) as BenchTable;
  const row = table.rows[0]!;
  const tokens = row[table.columns.indexOf('context tokens')] as number;
  expect(tokens).toBeGreaterThan(6_000);
  expect(tokens).toBeLessThan(11_000);
  expect(row[table.columns.indexOf('full ms/turn')]).toBeGreaterThan(0);
}, 60_000);

test('an unknown variant is a usage error (exit 2), not a crash', async () => {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, '../../bench/tokenization.ts'), '--variant', '3k'], { stdout: 'pipe', stderr: 'pipe' });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  expect(code).toBe(2);
  expect(stderr).toContain('unknown variant "3k"');
});

test('variants with the same table shape are reported as one table', () => {
  const variant = (ready: number, busy: number) => ({ title: 'staging', columns: ['ready', 'busy'], rows: [[ready, busy]], keyColumns: 1, notes: ['n'], runs: 1 });
  const merged = mergeSameShape([variant(0, 0.2), variant(4, 0.4), { ...variant(1, 0.3), title: 'other' }]);
  expect(merged.map((t) => t.rows)).toEqual([[[0, 0.2], [4, 0.4]], [[1, 0.3]]]);
  expect(merged[0]!.notes).toEqual(['n']);
});

test('threadCpuMs reads per-thread CPU in ms: the main thread is "main", and the threads add up to the process', () => {
  const before = threadCpuMs(process.pid);
  const usage0 = process.cpuUsage();
  const spent = () => {
    const u = process.cpuUsage(usage0);
    return (u.user + u.system) / 1000;
  };
  while (spent() < 50) {
    // busy: on CPU, on this thread
  }
  const split = splitThreads(before, threadCpuMs(process.pid));
  const total = spent();
  expect(split.main).toBeGreaterThan(30);
  expect(Math.abs(split.main + split.jit + split.other - total)).toBeLessThan(10);
});

test('treeMinorFaults counts the pages a process maps when it first touches memory', async () => {
  // The child writes one byte per 4 KiB page of a fresh 64 MiB buffer once told to: at least 32 faults even if the
  // kernel backed it with 2 MiB pages, ~16,000 with 4 KiB ones.
  const child = Bun.spawn([process.execPath, '-e', 'for await (const _ of console) { const b = Buffer.allocUnsafeSlow(64 << 20); for (let i = 0; i < b.length; i += 4096) b[i] = 1; console.log("done"); break; }'], { stdin: 'pipe', stdout: 'pipe' });
  await Bun.sleep(300);
  const before = treeMinorFaults(child.pid);
  child.stdin.write('go\n');
  child.stdin.flush();
  const reader = child.stdout.getReader();
  let out = '';
  while (!out.includes('done')) out += new TextDecoder().decode((await reader.read()).value);
  const after = treeMinorFaults(child.pid);
  child.kill();
  expect(before).toBeGreaterThan(0);
  expect(after - before).toBeGreaterThanOrEqual(32);
}, 30_000);

test('proxy-cpu measures the floor server (bare Bun parse-and-forward) with the per-thread split', async () => {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, '../../bench/proxy-cpu.ts'), '--variant', 'floor-large-json', '--calls=60', '--warmup=5'], { stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect([code, stderr]).toEqual([0, '']);
  const table = JSON.parse(stdout.split('\n').find((l) => l.startsWith(RESULT_MARK))!.slice(RESULT_MARK.length)) as BenchTable;
  const row = table.rows[0]!;
  const cell = (name: string) => row[table.columns.indexOf(name)] as number;
  expect([row[0], row[1], cell('calls')]).toEqual(['floor', '100 KB', 60]);
  expect(table.notes?.join(' ')).toContain('after 5 warm-up calls');
  expect(cell('main ms')).toBeGreaterThan(0);
  // The thread split and the /proc tick total measure the same process: within 10 ms ticks over 60 calls.
  expect(Math.abs(cell('main ms') + cell('JIT ms') + cell('other ms') - cell('CPU ms/call'))).toBeLessThan(0.5);
  // Reading a 100 KB body and a ~150 KB answer touches fresh pages now and then: a count per call, never negative.
  expect(cell('page faults/call')).toBeGreaterThanOrEqual(0);
  expect(Number.isFinite(cell('page faults/call'))).toBe(true);
}, 60_000);

test('open-loop load keeps its schedule while a reply is slow: every 20th call held 150 ms shows in p99, not in p50', async () => {
  let inFlight = 0;
  let maxInFlight = 0;
  let seen = 0;
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      await req.arrayBuffer();
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (++seen % 20 === 0) await Bun.sleep(150);
      inFlight--;
      return new Response('ok');
    },
  });
  const dir = mkdtempSync(join(tmpdir(), 'polar-open-load-'));
  try {
    const result = await runLoad(dir, 'open', { url: `http://127.0.0.1:${server.port}/`, headers: { 'content-type': 'application/json' }, body: '{}', connections: 8, durationS: 1, rate: 200, openLoop: true });
    expect(result.requests).toBe(200);
    expect(seen).toBe(200);
    expect(result.errors + result.non2xx).toBe(0);
    // A closed loop over one connection would wait out each slow reply; on a schedule the next calls go meanwhile.
    expect(maxInFlight).toBeGreaterThan(1);
    expect(result.latencyP50Ms).toBeLessThan(100);
    expect(result.latencyP99Ms).toBeGreaterThanOrEqual(150);
    expect(result.latencyMaxMs).toBeGreaterThanOrEqual(150);
    expect(result.scheduleLagP99Ms).toBeGreaterThanOrEqual(0);
  } finally {
    server.stop(true);
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
