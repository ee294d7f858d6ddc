/** `polar train-demo` flag checks (exit 2 before anything starts) and `--python` / `--trainer` being what it runs. */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPolar } from '../support/polar-cli.ts';

const out = mkdtempSync(join(tmpdir(), 'polar-train-usage-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

test('bad flags exit 2 naming the flag', async () => {
  const cases: [string[], string][] = [
    [['--harness', 'shell'], '--harness must be a harness CLI'],
    [['--harness', 'nope'], '--harness must be a harness CLI'],
    [['--max-staleness', '-1'], '--max-staleness must be an integer ≥ 0'],
    [['--async', '--max-staleness', '0'], '--async needs --max-staleness ≥ 1'],
    [['--max-staleness', '2'], '--max-staleness applies to --async'],
    [['--lr', '0'], '--lr must be a number > 0'],
    [['--tasks', join(out, 'missing')], 'no such directory'],
  ];
  for (const [args, message] of cases) {
    const run = await runPolar(['train-demo', '--out', out, ...args]);
    expect({ args, code: run.code }).toEqual({ args, code: 2 });
    expect(run.stderr).toContain(message);
  }
});

test('--python and --trainer choose what runs as the trainer', async () => {
  const missing = await runPolar(['train-demo', '--out', out, '--steps', '1', '--samples', '1', '--trainer', join(out, 'nope.py')], { timeoutMs: 120_000 });
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain(`trainer script ${join(out, 'nope.py')} not found`);
  const noPython = await runPolar(['train-demo', '--out', out, '--steps', '1', '--samples', '1', '--python', join(out, 'no-python')], { timeoutMs: 120_000 });
  expect(noPython.code).toBe(1);
  expect(noPython.stderr).toContain(`cannot start the trainer (${join(out, 'no-python')}`);
});

test('--steps, --samples, --lr, --async, --max-staleness and --task-timeout-s reach the trainer', async () => {
  const argvFile = join(out, 'argv.json');
  const trainer = join(out, 'dump-argv.py');
  writeFileSync(trainer, `import json, sys\njson.dump(sys.argv[1:], open(${JSON.stringify(argvFile)}, "w"))\nsys.exit(3)\n`);
  const run = await runPolar(['train-demo', '--out', out, '--trainer', trainer, '--steps', '3', '--samples', '2', '--lr', '0.25', '--async', '--max-staleness', '2', '--task-timeout-s', '33'], { timeoutMs: 120_000 });
  expect(run.code).toBe(1);
  const argv = JSON.parse(readFileSync(argvFile, 'utf8')) as string[];
  const value = (flag: string) => argv[argv.indexOf(flag) + 1];
  expect([value('--steps'), value('--samples'), value('--lr'), value('--max-staleness'), value('--task-timeout')]).toEqual(['3', '2', '0.25', '2', '33']);
  expect(argv).toContain('--async');
});
