/**
 * Process measurements from Linux /proc: CPU time and resident memory of a process and all its descendants (a
 * gateway such as `ccr start` may serve from a child process), and killing such a tree by PID.
 * Source: proc(5), https://man7.org/linux/man-pages/man5/proc.5.html (stat fields 14 utime, 15 stime; status VmRSS).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ; 100 on every mainstream Linux build). */
const USER_HZ = 100;

function readStat(pid: number): { ppid: number; cpuTicks: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // exited between listing and reading
  }
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), so field n is rest[n - 3].
  return { ppid: Number(rest[1]), cpuTicks: Number(rest[11]) + Number(rest[12]) };
}

/** PIDs of `root` and every live descendant (root first). Empty when root has exited. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const stat = readStat(pid);
    if (!stat) continue;
    const list = children.get(stat.ppid);
    if (list) list.push(pid);
    else children.set(stat.ppid, [pid]);
  }
  if (readStat(root) === null) return [];
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** User + system CPU time of `root` and its live descendants, in ms (10 ms resolution). */
export function treeCpuMs(root: number): number {
  let ticks = 0;
  for (const pid of processTree(root)) ticks += readStat(pid)?.cpuTicks ?? 0;
  return (ticks * 1000) / USER_HZ;
}

/** Resident set size of `root` and its live descendants, in bytes (VmRSS of each; shared pages counted per process). */
export function treeRssBytes(root: number): number {
  let kib = 0;
  for (const pid of processTree(root)) {
    try {
      const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      kib += Number(match?.[1] ?? 0);
    } catch {
      // exited meanwhile
    }
  }
  return kib * 1024;
}

/** Peak resident set size (VmHWM) of this process, in bytes. */
export function selfPeakRssBytes(): number {
  const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(match?.[1] ?? 0) * 1024;
}

/**
 * Sends `signal` to `root` and each descendant, by PID, leaves first (so a supervisor cannot respawn a child).
 * Processes that already exited are skipped.
 */
export function killTree(root: number, signal: NodeJS.Signals = 'SIGTERM'): void {
  for (const pid of processTree(root).reverse()) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/** Peak resident set size (VmHWM) of process `pid`, in bytes; 0 when it has exited. */
export function peakRssBytes(pid: number): number {
  try {
    const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(match?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}
