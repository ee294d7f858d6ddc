// Shared by the npm scripts (bun.mjs, start.mjs): which Bun to run, and running it so that every stop signal reaches it
// exactly once. With `spawnSync` a signal sent to the wrapper's pid alone (a supervisor, `kill PID`) killed only the
// wrapper and left the real server running as an orphan, holding its ports and sandboxes. Forwarding alone is not
// enough: a terminal's Ctrl-C (and `timeout`) signals the whole process group, npm forwards SIGINT/SIGTERM to its
// child as well, and polar treats a second SIGINT/SIGTERM as "force, do not wait for the graceful stop". So the child
// runs in its own session (its own process group: no signal reaches it but the ones forwarded here), and a signal is
// forwarded once, a repeat of it within REPEAT_MS being the same event seen twice (the group's copy and npm's).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Bun from PATH when present, else the pinned copy in node_modules; exits 2 when neither exists. */
export function bunPath() {
  if (spawnSync('bun', ['--version'], { stdio: 'ignore' }).status === 0) return 'bun';
  const local = join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'bun.cmd' : 'bun');
  if (!existsSync(local)) {
    console.error('bun not found on PATH or in node_modules; run `npm ci` first');
    process.exit(2);
  }
  return local;
}

/** Signals passed on to the child; the wrapper itself waits for the child to end. */
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

/** A repeat of a signal within this many ms is not forwarded again (a user's "again to force" comes later). */
export const REPEAT_MS = 300;

/**
 * Run `cmd args` with inherited stdio in a session of its own, pass SIGINT/SIGTERM/SIGHUP/SIGQUIT on to it (once per
 * REPEAT_MS each), and end this process the way the child ended: its exit code, or the same signal (re-raised once the
 * handlers are gone).
 */
export function runForwardingSignals(cmd, args, options = {}) {
  const child = spawn(cmd, args, { stdio: 'inherit', detached: true, ...options });
  const last = new Map();
  const handlers = FORWARDED.map((signal) => {
    const handler = () => {
      const now = Date.now();
      if (now - (last.get(signal) ?? -Infinity) < REPEAT_MS) return;
      last.set(signal, now);
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    };
    process.on(signal, handler);
    return [signal, handler];
  });
  child.on('error', (error) => {
    console.error(`cannot run ${cmd}: ${error.message}`);
    process.exit(127);
  });
  child.on('exit', (code, signal) => {
    for (const [name, handler] of handlers) process.off(name, handler);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
}
