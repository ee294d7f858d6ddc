/**
 * Process measurements from Linux /proc: CPU time and resident memory of a process and all its descendants (a
 * gateway such as `ccr start` may serve from a child process), and killing such a tree by PID.
 * Source: proc(5), https://man7.org/linux/man-pages/man5/proc.5.html (stat fields 10 minflt, 14 utime, 15 stime; status
 * VmRSS).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ; 100 on every mainstream Linux build). */
const USER_HZ = 100;

function readStat(pid: number): { ppid: number; cpuTicks: number; minorFaults: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // exited between listing and reading
  }
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), so field n is rest[n - 3].
  return { ppid: Number(rest[1]), cpuTicks: Number(rest[11]) + Number(rest[12]), minorFaults: Number(rest[7]) };
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

/**
 * Minor page faults of `root` and its live descendants so far (stat field 10): pages the process touched that the
 * kernel had to map, e.g. memory the allocator handed back to the OS and took again.
 */
export function treeMinorFaults(root: number): number {
  let faults = 0;
  for (const pid of processTree(root)) faults += readStat(pid)?.minorFaults ?? 0;
  return faults;
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

/**
 * On-CPU time of each thread of one process, in ms (ns resolution), summed by thread name with trailing digits
 * dropped (`HeapHelper3` → `HeapHelper`); the main thread (tid = pid) is `main`. From /proc/<pid>/task/<tid>/schedstat (first field, ns on CPU) and
 * .../comm. Threads that exited meanwhile are missing. Source: https://docs.kernel.org/scheduler/sched-stats.html
 */
export function threadCpuMs(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const name = Number(tid) === pid ? 'main' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim().replace(/\d+$/, '');
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      out[name] = (out[name] ?? 0) + ns / 1e6;
    } catch {
      // exited between listing and reading
    }
  }
  return out;
}

/**
 * `after − before` (threadCpuMs snapshots of a Bun process) split into `main` (the JS thread: HTTP server, handlers,
 * JSON, SQLite), `jit` (the JIT compiler threads) and `other` (Bun's HTTP client thread, GC helpers, the allocator's
 * scavenger), in ms.
 */
export function splitThreads(before: Record<string, number>, after: Record<string, number>): { main: number; jit: number; other: number } {
  let main = 0;
  let jit = 0;
  let other = 0;
  for (const [name, ms] of Object.entries(after)) {
    const delta = ms - (before[name] ?? 0);
    if (name === 'main') main += delta;
    else if (name.startsWith('JIT')) jit += delta;
    else other += delta;
  }
  return { main, jit, other };
}
