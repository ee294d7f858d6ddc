/**
 * The protocol between bench/run.ts and a benchmark script. A script calls `defineBench(...)` once at top level:
 * - `bun bench/x.ts --list-variants [--quick]` prints `@@bench-variants ["a","b"]`;
 * - `bun bench/x.ts --variant a [--quick]` runs one variant, prints its table and then `@@bench-result {BenchTable}`;
 * - `bun bench/x.ts [--quick] [variant...]` (by hand) runs the variants one after another in this process.
 * The runner starts a fresh process per variant and repeat, so no variant inherits another's JIT state or heap.
 */
import { renderText, type BenchTable } from './table.ts';

export const RESULT_MARK = '@@bench-result ';
export const VARIANTS_MARK = '@@bench-variants ';

export interface BenchContext {
  /** Small sizes and short loads (`--quick`): for smoke tests and a first look, not for quoting. */
  quick: boolean;
  /** Arguments after the protocol flags, for script-specific options. */
  args: string[];
}

export interface BenchDefinition {
  /** Short name; results go to bench/results/<name>.md. */
  name: string;
  variants(ctx: BenchContext): string[];
  run(variant: string, ctx: BenchContext): Promise<BenchTable>;
}

/** Prints a variant's table for a person reading the terminal. */
export function printTable(table: BenchTable): void {
  console.log(`\n${table.title}`);
  console.log(renderText(table.columns, table.rows));
  for (const note of table.notes ?? []) console.log(`  ${note}`);
}

/**
 * Runs the script side of the protocol (see the file comment). Exits the process with 1 on a failed variant (the
 * error on stderr), 2 on an unknown variant.
 */
export async function defineBench(def: BenchDefinition): Promise<void> {
  const argv = process.argv.slice(2);
  const quick = argv.includes('--quick');
  const variantAt = argv.indexOf('--variant');
  const single = variantAt >= 0 ? argv[variantAt + 1] : undefined;
  const rest = argv.filter((a, i) => a !== '--quick' && a !== '--list-variants' && (variantAt < 0 || (i !== variantAt && i !== variantAt + 1)));
  const ctx: BenchContext = { quick, args: rest };
  const all = def.variants(ctx);
  if (argv.includes('--list-variants')) {
    console.log(VARIANTS_MARK + JSON.stringify(all));
    return;
  }
  const named = rest.filter((a) => !a.startsWith('--'));
  const chosen = single !== undefined ? [single] : named.length > 0 ? named : all;
  for (const variant of chosen) {
    if (!all.includes(variant)) {
      console.error(`${def.name}: unknown variant ${JSON.stringify(variant)} (known: ${all.join(', ')})`);
      process.exit(2);
    }
  }
  for (const variant of chosen) {
    try {
      const table = await def.run(variant, ctx);
      printTable(table);
      if (single !== undefined) console.log(RESULT_MARK + JSON.stringify(table));
    } catch (error) {
      console.error(`${def.name} [${variant}] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      process.exit(1);
    }
  }
  process.exit(0); // servers or timers a variant left behind must not keep the process alive
}

/**
 * A numeric `--name=N` option from a benchmark's arguments (`ctx.args`), or `fallback` when absent.
 * @param check what the value must satisfy, with its description for the error (e.g. a positive number).
 * @throws Error naming the option when the value is not a number that passes `check`.
 */
export function numberOption(args: readonly string[], name: string, fallback: number, check: { ok: (value: number) => boolean; what: string }): number {
  const arg = args.find((a) => a.startsWith(`--${name}=`));
  if (arg === undefined) return fallback;
  const value = Number(arg.slice(name.length + 3));
  if (!Number.isFinite(value) || !check.ok(value)) throw new Error(`--${name} needs ${check.what}, got ${arg}`);
  return value;
}
