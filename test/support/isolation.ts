/** True when this process can reach nothing but loopback (only `lo` in /sys/class/net): real harness CLIs may run. */
import { readdirSync } from 'node:fs';

export function networkIsolated(): boolean {
  try {
    return readdirSync('/sys/class/net').every((name) => name === 'lo');
  } catch {
    return false;
  }
}

/** Suffix for the names of tests that need isolation, so a skip always carries its reason. */
export const NEEDS_ISOLATION = '(skipped outside a loopback-only network namespace: run `npm test`)';
