#!/usr/bin/env node
// Runs Bun from PATH when present, else the pinned copy in node_modules, so a machine with only Node and npm
// can run every script (`npm test`, `npm run build`, `npm run polar -- serve`, ...). Signals sent to this wrapper
// reach Bun (scripts/run-child.mjs).
import { bunPath, runForwardingSignals } from './run-child.mjs';

runForwardingSignals(bunPath(), process.argv.slice(2), { cwd: process.cwd() });
