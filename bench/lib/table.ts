/**
 * Result tables: what a benchmark variant hands the runner (a `BenchTable`), and how tables are printed as
 * aligned text for the terminal and as markdown for bench/results/.
 */

/** A table cell: a number (aggregated across repeats by the runner) or text (a key such as a contender's name). */
export type Cell = number | string;

/**
 * One variant's output. The first `keyColumns` columns identify a row across repeats (text or numbers that do not
 * vary); every other numeric cell is a measurement the runner reports as median and min–max.
 */
export interface BenchTable {
  title: string;
  columns: string[];
  rows: Cell[][];
  keyColumns: number;
  /** Lines printed under the table (units, caveats). */
  notes?: string[];
}

/** Formats a number with a precision that suits its magnitude (3 significant digits, no exponent). */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return '–';
  const abs = Math.abs(value);
  if (abs >= 100 || Number.isInteger(value)) return Math.round(value).toLocaleString('en-US');
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

const cellText = (cell: Cell): string => (typeof cell === 'number' ? formatNumber(cell) : cell);

/** Right-aligned plain-text table (two spaces between columns) for the terminal. */
export function renderText(columns: string[], rows: Cell[][]): string {
  const text = rows.map((row) => row.map(cellText));
  const widths = columns.map((c, i) => Math.max(c.length, ...text.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  return [line(columns), ...text.map(line)].join('\n');
}

/** GitHub-flavoured markdown table; `|` inside cells is escaped. */
export function renderMarkdown(columns: string[], rows: Cell[][]): string {
  const esc = (s: string) => s.replaceAll('|', '\\|');
  const head = `| ${columns.map(esc).join(' | ')} |`;
  const rule = `|${columns.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`;
  return [head, rule, ...rows.map((r) => `| ${r.map((c) => esc(cellText(c))).join(' | ')} |`)].join('\n');
}
