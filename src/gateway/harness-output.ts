/**
 * What the node keeps of a harness CLI's output: a per-session log file on the host (the runtime's own directory is
 * removed at teardown) and, when the CLI reported a failure, an error text with the tail of its stderr and stdout, so
 * a SessionResult with status ERROR says why without anyone having to reproduce the run.
 * Source: docs/architecture.md#data-model (SessionResult.error), docs/architecture.md#training-filter (a non-COMPLETED trajectory is not trained on), docs/architecture.md#staging-model.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HarnessOutcome, HarnessRunOutput } from './harnesses/types.ts';

/** Characters of each stream kept in the harness log file (the tail). */
export const HARNESS_LOG_TAIL_CHARS = 256 * 1024;
/** Characters of stderr quoted in a failed session's error (the tail). */
export const ERROR_STDERR_TAIL_CHARS = 2000;
/** Characters of stdout quoted in a failed session's error (the tail). */
export const ERROR_STDOUT_TAIL_CHARS = 1000;

/**
 * The last `maxChars` characters of `text` with trailing whitespace removed; when cut, prefixed with `…` so a reader
 * knows the start is missing. Returns '' for blank text.
 */
export function outputTail(text: string, maxChars: number): string {
  const trimmed = text.trimEnd();
  if (trimmed.length <= maxChars) return trimmed.trim() === '' ? '' : trimmed;
  return `…${trimmed.slice(-maxChars)}`;
}

/**
 * The SessionResult error of a session whose harness CLI reported failure:
 * `harness <name> failed: <reason> (exit <code>)` (the exit left out when the reason names it), then the stderr tail
 * and the stdout tail (each only when not blank).
 * @param harness adapter name, e.g. `opencode`.
 * @param run the finished process (exitCode null = killed by a signal).
 * @param outcome the adapter's verdict (`success` false).
 */
export function harnessFailureError(harness: string, run: HarnessRunOutput, outcome: HarnessOutcome): string {
  const exit = run.exitCode === null ? 'killed by a signal' : `exit ${run.exitCode}`;
  const parts = [`harness ${harness} failed: ${outcome.reason}${outcome.reason.includes(exit) ? '' : ` (${exit})`}`];
  const stderr = outputTail(run.stderr, ERROR_STDERR_TAIL_CHARS);
  if (stderr !== '') parts.push(`--- stderr (tail) ---\n${stderr}`);
  const stdout = outputTail(run.stdout, ERROR_STDOUT_TAIL_CHARS);
  if (stdout !== '') parts.push(`--- stdout (tail) ---\n${stdout}`);
  return parts.join('\n');
}

/** File name of a session's harness log: a hash of the session id, because the id is the harness's API key (a secret). */
export function harnessLogName(sessionId: string): string {
  return `s-${createHash('sha256').update(sessionId).digest('hex').slice(0, 20)}.log`;
}

/**
 * Write `<dir>/<harnessLogName(sessionId)>`: a header (task, sample, harness, argv[0], exit, outcome) and the tails
 * (HARNESS_LOG_TAIL_CHARS each) of stdout and stderr. Creates `dir`.
 * @returns the absolute path written.
 * @throws Error from the file system (callers log it; a log must never fail a session).
 */
export function writeHarnessLog(
  dir: string,
  info: { sessionId: string; taskId: string; sampleIndex: number; harness: string; command: string },
  run: HarnessRunOutput,
  outcome: HarnessOutcome,
): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, harnessLogName(info.sessionId));
  const header = [
    `task: ${info.taskId}  sample: ${info.sampleIndex}  harness: ${info.harness}  command: ${info.command}`,
    `exit: ${run.exitCode === null ? 'killed by a signal' : run.exitCode}  outcome: ${outcome.success ? 'success' : 'failure'}: ${outcome.reason}`,
  ];
  const body = [
    ...header,
    `--- stdout (last ${HARNESS_LOG_TAIL_CHARS} chars) ---`,
    run.stdout.slice(-HARNESS_LOG_TAIL_CHARS),
    `--- stderr (last ${HARNESS_LOG_TAIL_CHARS} chars) ---`,
    run.stderr.slice(-HARNESS_LOG_TAIL_CHARS),
    '',
  ].join('\n');
  writeFileSync(path, body);
  return path;
}
