/**
 * True when this process can reach nothing but loopback: /proc/self/net/dev (per network namespace, unlike
 * /sys/class/net, which shows the host's interfaces until sysfs is remounted) lists only `lo`. Real harness CLIs may run.
 */
import { readFileSync } from 'node:fs';

export function networkIsolated(): boolean {
  try {
    const lines = readFileSync('/proc/self/net/dev', 'utf8').split('\n').slice(2).filter((line) => line.includes(':'));
    return lines.length > 0 && lines.every((line) => line.split(':')[0]!.trim() === 'lo');
  } catch {
    return false;
  }
}

/** Suffix for the names of tests that need isolation, so a skip always carries its reason. */
export const NEEDS_ISOLATION = '(skipped outside a loopback-only network namespace: run `npm test`)';
