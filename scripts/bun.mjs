#!/usr/bin/env node
// Runs Bun from PATH when present, else the pinned copy in node_modules, so a machine with only Node and npm
// can run every script (`npm test`, `npm run build`, ...).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const onPath = spawnSync('bun', ['--version'], { stdio: 'ignore' }).status === 0;
const local = join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'bun.cmd' : 'bun');
const bun = onPath ? 'bun' : local;
if (!onPath && !existsSync(local)) {
  console.error('bun not found on PATH or in node_modules; run `npm ci` first');
  process.exit(2);
}
const result = spawnSync(bun, process.argv.slice(2), { stdio: 'inherit', cwd: process.cwd() });
process.exit(result.status ?? 1);
