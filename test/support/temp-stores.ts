/**
 * Test helper for store tests: temporary directories and open stores that are closed and removed after each test of
 * the calling file (afterEach), so a failing test leaves no file or handle behind.
 */
import { afterEach } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '../../src/store/index.ts';

export function useTempStores(prefix: string): {
  /** Stores to close after the test; push what you open, remove what you close yourself. */
  stores: Store[];
  /** A fresh temporary directory, removed after the test. */
  tempDir(): string;
} {
  const dirs: string[] = [];
  const stores: Store[] = [];
  afterEach(() => {
    for (const store of stores.splice(0)) store.close();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return {
    stores,
    tempDir() {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
  };
}
