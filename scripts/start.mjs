#!/usr/bin/env node
// `npm start`: the main job (`polar run examples/tasks --harness pi --samples 4` on the built-in simulator).
// The bundled example tasks are this repository's own, so on a machine without bubblewrap (a fresh laptop with only
// Node and npm) they run unsandboxed, and the command says so; any other task still needs a sandbox or an explicit
// `--no-sandbox` (src/gateway/runtimes/). Extra arguments after `npm start --` are passed on; signals sent to this
// wrapper reach polar run (scripts/run-child.mjs).
import { spawnSync } from 'node:child_process';
import { bunPath, root, runForwardingSignals } from './run-child.mjs';

const extra = process.argv.slice(2);
const hasBwrap = spawnSync('bwrap', ['--version'], { stdio: 'ignore' }).status === 0;
const args = ['src/main.ts', 'run', 'examples/tasks', '--harness', 'pi', '--samples', '4', ...extra];
if (!hasBwrap && !extra.includes('--no-sandbox')) {
  console.error('npm start: bubblewrap (bwrap) is not installed, so the bundled example tasks run without a sandbox (--no-sandbox).');
  console.error('npm start: install it (apt-get install bubblewrap) to run every session in its own sandbox.');
  args.push('--no-sandbox');
}
runForwardingSignals(bunPath(), args, { cwd: root });
