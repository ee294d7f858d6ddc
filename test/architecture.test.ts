/**
 * Module boundaries of ARCHITECTURE.md §8: core/ imports nothing from the project; dialects/ import only core/ and do
 * no I/O; only proxy/ and observe/ import hono; only store/ touches SQLite.
 */
import { expect, test } from 'bun:test';
import { Glob } from 'bun';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(import.meta.dir, '..');
const src = join(root, 'src');

interface Import { file: string; spec: string; target: string | null }

async function collectImports(): Promise<Import[]> {
  const out: Import[] = [];
  const importRe = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for await (const file of new Glob('**/*.ts').scan(src)) {
    const text = await Bun.file(join(src, file)).text();
    for (const m of text.matchAll(importRe)) {
      const spec = m[1] ?? m[2] ?? m[3]!;
      const target = spec.startsWith('.') ? relative(src, resolve(dirname(join(src, file)), spec)) : null;
      out.push({ file, spec, target });
    }
  }
  return out;
}

const imports = await collectImports();
const top = (path: string) => path.split('/')[0]!;

test('core/ imports nothing from the project', () => {
  const bad = imports.filter((i) => top(i.file) === 'core' && i.target !== null && top(i.target) !== 'core');
  expect(bad).toEqual([]);
});

test('dialects/ import only core/, their own folder and dialects/shared/, and no I/O modules', () => {
  const io = /^(node:|bun$|bun:|hono)|^(fs|net|http|https|child_process)$/;
  const bad = imports.filter((i) => {
    if (top(i.file) !== 'dialects') return false;
    if (i.target === null) return io.test(i.spec);
    const folder = i.target.split('/')[1];
    return !(top(i.target) === 'core' || (top(i.target) === 'dialects' && (folder === i.file.split('/')[1] || folder === 'shared')));
  });
  expect(bad).toEqual([]);
});

test('only proxy/ and observe/ import hono', () => {
  const bad = imports.filter((i) => i.target === null && /^hono(\/|$)/.test(i.spec) && !['proxy', 'observe'].includes(top(i.file)));
  expect(bad).toEqual([]);
});

test('only store/ touches SQLite', () => {
  const bad = imports.filter((i) => i.target === null && /^(bun:sqlite|better-sqlite3|sqlite3?)$/.test(i.spec) && top(i.file) !== 'store');
  expect(bad).toEqual([]);
});

test('the scan sees the project (guards against a vacuous pass)', () => {
  expect(imports.some((i) => i.file === 'main.ts')).toBe(true);
  expect(imports.some((i) => top(i.file) === 'core')).toBe(true);
});
