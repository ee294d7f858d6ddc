/** The header every benchmark run prints and records: machine, runtime, date and commit. */
import { cpus, totalmem } from 'node:os';

export interface MachineInfo {
  cores: number;
  memoryGiB: number;
  cpuModel: string;
  bun: string;
  node: string | null;
  date: string;
  /** Short commit hash, with `+dirty` when the tree has uncommitted changes; `unknown` outside git. */
  commit: string;
}

function git(args: string[]): string | null {
  const result = Bun.spawnSync(['git', ...args], { stdout: 'pipe', stderr: 'ignore' });
  return result.exitCode === 0 ? result.stdout.toString().trim() : null;
}

/** Collects the machine description (spawns `git` and `node --version` once each). */
export function machineInfo(now: Date = new Date()): MachineInfo {
  const head = git(['rev-parse', '--short', 'HEAD']);
  const dirty = (git(['status', '--porcelain', '--untracked-files=no']) ?? '') !== '';
  const nodeVersion = Bun.spawnSync(['node', '--version'], { stdout: 'pipe', stderr: 'ignore' });
  return {
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    bun: Bun.version,
    node: nodeVersion.exitCode === 0 ? nodeVersion.stdout.toString().trim() : null,
    date: now.toISOString(),
    commit: head ? `${head}${dirty ? '+dirty' : ''}` : 'unknown',
  };
}

/** One line for terminals and result files. */
export function describeMachine(m: MachineInfo): string {
  return `${m.date} · commit ${m.commit} · ${m.cores} cores (${m.cpuModel}) · ${m.memoryGiB} GiB · Bun ${m.bun}${m.node ? ` · Node ${m.node}` : ''}`;
}
