/**
 * `polar examples` (src/cli/examples.ts): the manifest embeds every file under examples/ (it is regenerated here and
 * must equal the committed one), and the files written out equal the repository's, byte for byte and with their
 * executable bits; existing files are kept unless --force.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { writeExamples } from '../../src/cli/examples.ts';
import { EXAMPLE_FILES } from '../../src/examples/manifest.ts';
import { executableFiles, exampleFiles, manifestText } from '../../scripts/examples-manifest.ts';
import { runPolar } from '../support/polar-cli.ts';

const root = resolve(import.meta.dir, '../..');
const out = mkdtempSync(join(tmpdir(), 'polar-examples-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

test('the committed manifest lists exactly the files under examples/ (else: node scripts/bun.mjs scripts/examples-manifest.ts)', () => {
  const files = exampleFiles();
  expect(readFileSync(join(root, 'src/examples/manifest.ts'), 'utf8')).toBe(manifestText(files, executableFiles(files)));
  expect(Object.keys(EXAMPLE_FILES)).toEqual(files);
  expect(files).toContain('tasks/mean-empty/task.yaml');
});

test('written out: the same bytes and executable bits; existing files kept unless force', async () => {
  const dir = join(out, 'examples');
  const first = await writeExamples(dir);
  expect(first.kept).toEqual([]);
  for (const name of exampleFiles()) {
    const source = join(root, 'examples', name);
    expect({ name, same: readFileSync(join(dir, name)).equals(readFileSync(source)) }).toEqual({ name, same: true });
    expect({ name, exec: (statSync(join(dir, name)).mode & 0o100) !== 0 }).toEqual({ name, exec: (statSync(source).mode & 0o100) !== 0 });
  }
  writeFileSync(join(dir, 'tasks/mean-empty/task.yaml'), 'edited');
  const second = await writeExamples(dir);
  expect(second).toEqual({ written: [], kept: exampleFiles() });
  expect(readFileSync(join(dir, 'tasks/mean-empty/task.yaml'), 'utf8')).toBe('edited');
  const forced = await writeExamples(dir, { force: true });
  expect(forced.written).toHaveLength(exampleFiles().length);
  expect(readFileSync(join(dir, 'tasks/mean-empty/task.yaml'), 'utf8')).toBe(readFileSync(join(root, 'examples/tasks/mean-empty/task.yaml'), 'utf8'));
});

test('polar examples DIR: exit 0 writing, exit 1 naming what it kept', async () => {
  const dir = join(out, 'cli');
  const run = await runPolar(['examples', dir]);
  expect(run.code).toBe(0);
  expect(run.stdout).toContain(`wrote ${exampleFiles().length} file(s)`);
  const again = await runPolar(['examples', dir]);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain('--force overwrites them');
});
