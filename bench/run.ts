/**
 * Benchmark runner: `npm run bench -- [names...] [--quick] [--repeats N] [--note TEXT] [--no-save]`.
 * Discovers bench/*.ts, runs every variant of each in a fresh Bun process, repeats (default 5, --quick 1), prints
 * medians with min–max, and appends the tables as markdown to bench/results/<name>.md with date, commit and machine.
 * Benchmarks print numbers; nothing here passes or fails on time. A script that does not speak the bench/lib/bench.ts
 * protocol (no `defineBench`) is run whole as one variant and its printed table is parsed.
 */
import { appendFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { RESULT_MARK, VARIANTS_MARK } from './lib/bench.ts';
import { describeMachine, machineInfo } from './lib/machine.ts';
import { spread } from './lib/stats.ts';
import { formatNumber, renderMarkdown, renderText, type BenchTable, type Cell } from './lib/table.ts';

const benchDir = import.meta.dir;
const resultsDir = join(benchDir, 'results');
const bun = process.execPath;
/** A variant that runs longer than this is killed and reported as failed. */
const VARIANT_LIMIT_MS = 15 * 60_000;

interface Args {
  names: string[];
  quick: boolean;
  repeats: number;
  note: string | null;
  save: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { names: [], quick: false, repeats: 5, note: null, save: true };
  let repeatsGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') args.quick = true;
    else if (a === '--no-save') args.save = false;
    else if (a === '--repeats' || a === '--note') {
      const value = argv[++i];
      if (value === undefined) usage(`${a} needs a value`);
      if (a === '--note') args.note = value;
      else {
        args.repeats = Number(value);
        repeatsGiven = true;
        if (!Number.isInteger(args.repeats) || args.repeats < 1) usage(`--repeats must be a positive integer, got ${value}`);
      }
    } else if (a === '--help' || a === '-h') usage(null);
    else if (a.startsWith('-')) usage(`unknown option ${a}`);
    else args.names.push(a);
  }
  if (args.quick && !repeatsGiven) args.repeats = 1;
  return args;
}

function usage(error: string | null): never {
  const text = 'usage: bun bench/run.ts [names...] [--quick] [--repeats N] [--note TEXT] [--no-save]';
  if (error) {
    console.error(`bench: ${error}\n${text}`);
    process.exit(2);
  }
  console.log(text);
  process.exit(0);
}

/** Benchmark scripts: bench/*.ts except this runner, by name. */
function discover(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of readdirSync(benchDir).sort()) {
    if (!file.endsWith('.ts') || file === 'run.ts' || file.endsWith('.test.ts') || file.endsWith('.d.ts')) continue;
    found.set(basename(file, '.ts'), join(benchDir, file));
  }
  return found;
}

interface ChildRun {
  code: number;
  stdout: string;
}

/** Runs `bun file ...args` in a fresh process; stderr streams to ours, stdout is captured and echoed. */
async function runChild(file: string, args: string[]): Promise<ChildRun> {
  const proc = Bun.spawn([bun, file, ...args], { cwd: join(benchDir, '..'), stdin: 'ignore', stdout: 'pipe', stderr: 'inherit' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), VARIANT_LIMIT_MS);
  let stdout = '';
  const decoder = new TextDecoder();
  for await (const chunk of proc.stdout) {
    const text = decoder.decode(chunk, { stream: true });
    stdout += text;
    for (const line of text.split('\n')) if (line !== '' && !line.startsWith(RESULT_MARK)) process.stdout.write(`  │ ${line}\n`);
  }
  const code = await proc.exited;
  clearTimeout(timer);
  return { code, stdout };
}

/** Parses an aligned text table (header line, then rows; columns separated by two or more spaces) or a markdown table. */
export function parseTextTable(stdout: string): BenchTable {
  const lines = stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^\|[\s:|-]+\|$/.test(l)); // drop markdown rules
  const split = (line: string) => (line.startsWith('|') && line.endsWith('|') ? line.slice(1, -1).split('|').map((c) => c.trim()) : line.split(/\s{2,}/));
  // The header is the first line whose column count is shared by the lines after it.
  for (let i = 0; i < lines.length - 1; i++) {
    const columns = split(lines[i]!);
    if (columns.length < 2) continue;
    const rows = [];
    for (let j = i + 1; j < lines.length && split(lines[j]!).length === columns.length; j++) rows.push(split(lines[j]!));
    if (rows.length > 0) return { title: lines.slice(0, i).join(' ') || 'results', columns, rows, keyColumns: 0 };
  }
  throw new Error('no table found in the output');
}

/** `12.5`, `1,024`, `37M`, `2.1k`, `4.0%` → value and unit; anything else → null. */
function numeric(cell: Cell): { value: number; unit: string } | null {
  if (typeof cell === 'number') return { value: cell, unit: '' };
  const match = /^(-?[\d,]*\.?\d+)([A-Za-z%]*)$/.exec(cell.trim());
  return match ? { value: Number(match[1]!.replaceAll(',', '')), unit: match[2]! } : null;
}

/** Median (min–max) per cell across repeats; rows are matched by position, text cells must agree. */
export function aggregate(tables: BenchTable[]): BenchTable {
  const first = tables[0]!;
  const rows = first.rows.map((row, r) =>
    row.map((cell, c): Cell => {
      const values = tables.map((t) => t.rows[r]?.[c]);
      if (c < first.keyColumns || values.every((v) => v === cell)) return cell;
      const nums = values.map((v) => (v === undefined ? null : numeric(v)));
      const unit = nums[0]?.unit ?? '';
      if (nums.some((n) => n === null || n.unit !== unit)) return values.map((v) => String(v ?? '–')).join(' / ');
      const s = spread(nums.map((n) => n!.value));
      if (tables.length === 1) return typeof cell === 'number' ? s.median : `${formatNumber(s.median)}${unit}`;
      return `${formatNumber(s.median)}${unit} (${formatNumber(s.min)}–${formatNumber(s.max)})`;
    }),
  );
  return { ...first, rows };
}

/** Variants that print the same table shape (title and columns) become one table, rows in variant order. */
export function mergeSameShape<T extends BenchTable & { runs: number }>(tables: T[]): T[] {
  const merged: T[] = [];
  for (const table of tables) {
    const into = merged.find((m) => m.title === table.title && JSON.stringify(m.columns) === JSON.stringify(table.columns));
    if (!into) merged.push({ ...table, rows: [...table.rows], notes: [...(table.notes ?? [])] });
    else {
      into.rows.push(...table.rows);
      for (const note of table.notes ?? []) if (!into.notes!.includes(note)) into.notes!.push(note);
      into.runs = Math.min(into.runs, table.runs);
    }
  }
  return merged;
}

async function runBenchmark(name: string, file: string, args: Args): Promise<{ tables: BenchTable[]; failures: string[] }> {
  const flags = args.quick ? ['--quick'] : [];
  const protocol = readFileSync(file, 'utf8').includes('defineBench(');
  const failures: string[] = [];
  let variants: (string | null)[] = [null];
  if (protocol) {
    const listed = await runChild(file, ['--list-variants', ...flags]);
    const line = listed.stdout.split('\n').find((l) => l.startsWith(VARIANTS_MARK));
    if (listed.code !== 0 || !line) return { tables: [], failures: [`${name}: could not list variants (exit ${listed.code})`] };
    variants = JSON.parse(line.slice(VARIANTS_MARK.length)) as string[];
  }
  const results = new Map<string | null, BenchTable[]>(variants.map((v) => [v, []]));
  // Repeats go round-robin over the variants, so slow drift of a shared machine spreads over all of them.
  for (let repeat = 1; repeat <= args.repeats; repeat++) {
    for (const variant of variants) {
      console.log(`▸ ${name}${variant ? ` [${variant}]` : ''} run ${repeat}/${args.repeats}`);
      const run = await runChild(file, variant === null ? [] : ['--variant', variant, ...flags]);
      if (run.code !== 0) {
        failures.push(`${name}${variant ? ` [${variant}]` : ''} run ${repeat}: exit ${run.code}`);
        continue;
      }
      try {
        const line = run.stdout.split('\n').find((l) => l.startsWith(RESULT_MARK));
        results.get(variant)!.push(line ? (JSON.parse(line.slice(RESULT_MARK.length)) as BenchTable) : parseTextTable(run.stdout));
      } catch (error) {
        failures.push(`${name}${variant ? ` [${variant}]` : ''} run ${repeat}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
  const tables = [...results.values()].filter((t) => t.length > 0).map((t) => ({ ...aggregate(t), runs: t.length }));
  return { tables: mergeSameShape(tables), failures };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const all = discover();
  const names = args.names.length > 0 ? args.names : [...all.keys()];
  for (const n of names) if (!all.has(n)) usage(`unknown benchmark ${JSON.stringify(n)} (known: ${[...all.keys()].join(', ')})`);
  const machine = machineInfo();
  const header = describeMachine(machine);
  console.log(`Polar benchmarks · ${header}`);
  console.log(`${args.quick ? 'quick mode, ' : ''}${args.repeats} run(s) per variant, each in a fresh process; cells are median (min–max)`);
  if (args.note) console.log(`note: ${args.note}`);
  let failed = 0;
  for (const name of names) {
    const { tables, failures } = await runBenchmark(name, all.get(name)!, args);
    failed += failures.length;
    const sections: string[] = [];
    for (const table of tables as (BenchTable & { runs: number })[]) {
      console.log(`\n${table.title}  (${table.runs} run${table.runs === 1 ? '' : 's'})`);
      console.log(renderText(table.columns, table.rows));
      for (const note of table.notes ?? []) console.log(`  ${note}`);
      sections.push(`### ${table.title}\n\n${renderMarkdown(table.columns, table.rows)}\n${(table.notes ?? []).map((n) => `\n${n}`).join('')}\n\n_${table.runs} run(s)${table.runs > 1 ? '; cells: median (min–max)' : ''}_\n`);
    }
    for (const failure of failures) console.error(`✗ ${failure}`);
    if (args.save && sections.length > 0) {
      mkdirSync(resultsDir, { recursive: true });
      const block = [
        `## ${machine.date.slice(0, 16).replace('T', ' ')} UTC · commit ${machine.commit}${args.quick ? ' · --quick' : ''}`,
        '',
        `Machine: ${header}.`,
        ...(args.note ? ['', `Note: ${args.note}`] : []),
        ...(failures.length > 0 ? ['', `Failed runs: ${failures.join('; ')}`] : []),
        '',
        ...sections,
        '',
      ].join('\n');
      appendFileSync(join(resultsDir, `${name}.md`), block);
      console.log(`→ appended to bench/results/${name}.md`);
    }
  }
  process.exit(failed > 0 ? 1 : 0);
}

if (import.meta.main) await main();
