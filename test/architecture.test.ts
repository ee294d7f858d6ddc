/**
 * Module boundaries (docs/architecture.md#module-rules): core/ imports nothing from the project; dialects/ import only
 * core/ and do no I/O, and every dialect folder has the same codec files; only proxy/ and observe/ import hono; only
 * store/ touches SQLite; rollout/ and gateway/ are peers over HTTP (neither imports the other; wire shapes live once in
 * core/contracts/); gateway/ does not know the simulator; the import graph has no cycle; nothing cites or reads
 * documents outside the repository.
 */
import { expect, test } from 'bun:test';
import { Glob } from 'bun';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(import.meta.dir, '..');
const src = join(root, 'src');

interface Import { file: string; spec: string; target: string | null; typeOnly: boolean }

async function collectImports(): Promise<Import[]> {
  const out: Import[] = [];
  const importRe = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for await (const file of new Glob('**/*.ts').scan(src)) {
    const text = await Bun.file(join(src, file)).text();
    for (const m of text.matchAll(importRe)) {
      const spec = m[1] ?? m[2] ?? m[3]!;
      const target = spec.startsWith('.') ? relative(src, resolve(dirname(join(src, file)), spec)) : null;
      out.push({ file, spec, target, typeOnly: /^[\s;]*(?:import|export)\s+type\s/.test(m[0]) });
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

test('rollout/ and gateway/ never import each other (peers over HTTP; shared shapes live in core/contracts/)', () => {
  const bad = imports.filter((i) => i.target !== null && (
    (top(i.file) === 'rollout' && top(i.target) === 'gateway') || (top(i.file) === 'gateway' && top(i.target) === 'rollout')));
  expect(bad).toEqual([]);
});

test('rollout/ does not import the stack that composes it', () => {
  const bad = imports.filter((i) => top(i.file) === 'rollout' && i.target !== null && top(i.target) === 'stack');
  expect(bad).toEqual([]);
});

test('gateway/ knows neither the simulator nor the stack that composes it', () => {
  const bad = imports.filter((i) => top(i.file) === 'gateway' && i.target !== null && ['sim', 'stack'].includes(top(i.target)));
  expect(bad).toEqual([]);
});

test('every dialect folder has the same codec files', () => {
  const required = ['decode-request.ts', 'decode-response.ts', 'encode-request.ts', 'encode-response.ts', 'encode-stream.ts', 'errors.ts', 'finish-reason.ts', 'index.ts', 'schema.ts', 'usage.ts'];
  const dialectsDir = join(src, 'dialects');
  const folders = readdirSync(dialectsDir).filter((d) => d !== 'shared' && statSync(join(dialectsDir, d)).isDirectory());
  expect(folders.length).toBeGreaterThanOrEqual(4);
  const missing = folders.flatMap((d) => required.filter((f) => !readdirSync(join(dialectsDir, d)).includes(f)).map((f) => `${d}/${f}`));
  expect(missing).toEqual([]);
});

test('wire contracts are defined once, in core/contracts/', async () => {
  const contractNames = /\b(taskRequest|agentSpec|dispatchSpec|sessionResult|prepareAction|heartbeat|nodeRegistration|behaviourScript|simScript|taskRuntime)Schema\s*=|\b(interface|type)\s+(TaskRequest|AgentSpec|DispatchSpec|PrepareAction)\b\s*[={]|\bclass\s+DispatchError\b|\bnum_samples:\s*z\.|\bsample_index:\s*z\./;
  const bad: string[] = [];
  for await (const file of new Glob('**/*.ts').scan(src)) {
    if (file.startsWith('core/contracts/')) continue;
    const text = await Bun.file(join(src, file)).text();
    text.split('\n').forEach((line, n) => {
      if (contractNames.test(line)) bad.push(`${file}:${n + 1}: ${line.trim()}`);
    });
  }
  expect(bad).toEqual([]);
  // The detector is not vacuous: it finds the definitions in core/contracts/.
  const own = await Bun.file(join(src, 'core/contracts/task.ts')).text();
  expect(contractNames.test(own)).toBe(true);
});

test('the import graph of src/ has no cycle (type-only imports are erased at runtime and do not count)', () => {
  const graph = new Map<string, Set<string>>();
  for (const i of imports) {
    if (i.target === null || !i.target.endsWith('.ts') || i.typeOnly) continue;
    if (!graph.has(i.file)) graph.set(i.file, new Set());
    graph.get(i.file)!.add(i.target);
  }
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      cycles.push([...path.slice(path.indexOf(file)), file].join(' → '));
      return;
    }
    state.set(file, 'open');
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of graph.keys()) visit(file, []);
  expect(cycles).toEqual([]);
});

test('the scan sees the project (guards against a vacuous pass)', () => {
  expect(imports.some((i) => i.file === 'main.ts')).toBe(true);
  expect(imports.some((i) => top(i.file) === 'core')).toBe(true);
  expect(imports.some((i) => i.typeOnly) && imports.some((i) => !i.typeOnly && i.target !== null)).toBe(true);
});

/** Files allowed to cite documents outside the repository: none (kept as a list so an exception must be named). */
const OUTSIDE_CITATION_ALLOWED = new Set<string>([]);

test('nothing in src/, test/, bench/ or scripts/ cites documents outside the repository or reads ../shared', async () => {
  // Design notes that live outside the repository, and paths that leave it. Imports of src/dialects/shared/ are in-repo.
  const outside = /ARCHITECTURE\.md|ARCHITECTURE §|PROTOCOL-NOTES|STYLE\.md|BENCH-PEERS|REFERENCE-API|\/work\/shared|\.\.\/shared\/(fixtures|[A-Z])|\.\.\/\.\.\/shared|\bcontracts? §?\d|\bissue #?\d/;
  const offenders: string[] = [];
  let scanned = 0;
  for (const dir of ['src', 'test', 'bench', 'scripts']) {
    for await (const file of new Glob('**/*.{ts,mjs,js,sh}').scan(join(root, dir))) {
      const path = `${dir}/${file}`;
      if (path === 'test/architecture.test.ts') continue; // the pattern above names what it looks for
      scanned++;
      const text = await Bun.file(join(root, path)).text();
      if (outside.test(text) && !OUTSIDE_CITATION_ALLOWED.has(path)) offenders.push(path);
    }
  }
  expect(scanned).toBeGreaterThan(100);
  expect(offenders).toEqual([]);
});

test('the allow-list of outside citations only names files that still need it', async () => {
  const stale: string[] = [];
  for (const path of OUTSIDE_CITATION_ALLOWED) {
    const file = Bun.file(join(root, path));
    if (!(await file.exists()) || !/ARCHITECTURE|PROTOCOL-NOTES|\bcontracts? §?\d|\bissue #?\d/.test(await file.text())) stale.push(path);
  }
  expect(stale).toEqual([]);
});

test('every docs/<file>.md#section that a comment cites is a heading of that document', async () => {
  // GitHub's heading anchors: lower case, punctuation dropped, spaces → hyphens.
  const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s-]/gu, '').replace(/\s/g, '-');
  const anchors = new Map<string, Set<string>>();
  for (const doc of ['architecture.md', 'protocol-notes.md']) {
    const text = await Bun.file(join(root, 'docs', doc)).text();
    anchors.set(doc, new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!))));
  }
  const broken: string[] = [];
  let cited = 0;
  for (const dir of ['src', 'test', 'bench', 'scripts']) {
    for await (const file of new Glob('**/*.{ts,mjs,js,sh}').scan(join(root, dir))) {
      const text = await Bun.file(join(root, dir, file)).text();
      for (const m of text.matchAll(/docs\/(architecture\.md|protocol-notes\.md)#([\w-]+)/g)) {
        cited++;
        if (!anchors.get(m[1]!)!.has(m[2]!)) broken.push(`${dir}/${file}: docs/${m[1]}#${m[2]}`);
      }
    }
  }
  expect(cited).toBeGreaterThan(50);
  expect(broken).toEqual([]);
});
