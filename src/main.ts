#!/usr/bin/env bun
/**
 * `polar`: the single binary. Commands: docs/architecture.md#processes and the README. Exit codes: 0 success, 1 failed work,
 * 2 bad usage (message on stderr).
 */
import './startup.ts';
import { Command, CommanderError } from 'commander';
import { EXIT_FAILED, EXIT_USAGE, UsageError } from './cli/common.ts';
import * as versionCmd from './cli/version.ts';
import * as simCmd from './cli/sim.ts';
import * as configCmd from './cli/config.ts';
import * as traceCmd from './cli/trace.ts';
import * as rolloutCmd from './cli/rollout.ts';
import * as submitCmd from './cli/submit.ts';
import * as statusCmd from './cli/status.ts';
import * as exportCmd from './cli/export.ts';
import * as proxyCmd from './cli/proxy.ts';
import * as gatewayCmd from './cli/gateway.ts';
import * as harnessCmd from './cli/harness.ts';
import * as doctorCmd from './cli/doctor.ts';
import * as runCmd from './cli/run.ts';
import * as serveCmd from './cli/serve.ts';
import * as trainDemoCmd from './cli/train-demo.ts';
import * as tunnelCmd from './cli/tunnel.ts';
import * as resultsCmd from './cli/results.ts';
import * as examplesCmd from './cli/examples.ts';

const program = new Command();
program
  .name('polar')
  .description('Rollout substrate for agentic RL on unmodified agent harnesses (gateway proxy, simulator, rollout server)')
  // One hint line after a usage error (commander prints "Did you mean …?" for a mistyped flag or command), not the
  // whole help text.
  .showHelpAfterError("(add --help for this command's usage)")
  .exitOverride();

for (const command of [versionCmd, configCmd, traceCmd, resultsCmd, simCmd, rolloutCmd, submitCmd, statusCmd, exportCmd, gatewayCmd, harnessCmd, doctorCmd, proxyCmd, runCmd, serveCmd, trainDemoCmd, tunnelCmd, examplesCmd]) command.register(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // --help and --version end here with code 0; parse errors were already printed by commander.
    process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
  }
  if (error instanceof UsageError) {
    console.error(`polar: ${error.message}`);
    process.exit(EXIT_USAGE);
  }
  console.error(`polar: ${error instanceof Error ? error.message : String(error)}`);
  if (process.env.POLAR_DEBUG) console.error(error);
  process.exit(EXIT_FAILED);
}
