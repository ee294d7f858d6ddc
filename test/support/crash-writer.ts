/**
 * Test helper for the store's SIGKILL durability tests: a child Bun process that opens the store at `dbPath` and
 * inserts `makeRecord(i)` from `i = count()` on, one line `committed i` on stdout after each commit; `runAndKill`
 * reads those lines and kills the child with SIGKILL mid-write.
 */
import { expect } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const storeModule = resolve(import.meta.dir, '../../src/store/index.ts');

export interface CrashWriter {
  /** Run the writer until it has reported `minCommits` commits, then SIGKILL it; returns the highest reported index. */
  runAndKill(minCommits: number): Promise<number>;
  /**
   * One `runAndKill(n)` per entry of `rounds`, each followed by `verify(lastReported)`, which checks the store and
   * returns how many records it holds. Asserts every round got at least its `n` new commits; returns the final count.
   */
  killRounds(rounds: number[], verify: (lastReported: number) => number): Promise<number>;
}

/**
 * Writes the child script to `dir/writer.ts`. `generatorSource` is JavaScript source that defines `makeRecord(i)`
 * (shared as text so that the test and the child build the same records).
 */
export function createCrashWriter(opts: { dir: string; dbPath: string; generatorSource: string }): CrashWriter {
  const childPath = join(opts.dir, 'writer.ts');
  writeFileSync(
    childPath,
    `import { openStore } from ${JSON.stringify(storeModule)};
${opts.generatorSource}
const store = openStore(${JSON.stringify(opts.dbPath)});
for (let i = store.completions.count(); ; i++) {
  store.completions.insert(makeRecord(i));
  process.stdout.write('committed ' + i + '\\n');
}
`,
  );
  const writer: CrashWriter = {
    async killRounds(rounds, verify) {
      let previous = 0;
      for (const minCommits of rounds) {
        const last = await writer.runAndKill(minCommits);
        expect(last).toBeGreaterThanOrEqual(previous + minCommits - 1);
        previous = verify(last);
      }
      return previous;
    },
    async runAndKill(minCommits: number): Promise<number> {
      const child = Bun.spawn([process.execPath, childPath], { stdout: 'pipe', stderr: 'pipe' });
      const decoder = new TextDecoder();
      let buffered = '';
      let seen = 0;
      let last = -1;
      for await (const chunk of child.stdout) {
        buffered += decoder.decode(chunk, { stream: true });
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) {
          last = Number(line.slice('committed '.length));
          seen++;
        }
        if (seen >= minCommits) {
          child.kill('SIGKILL');
          break;
        }
      }
      expect(await child.exited).not.toBe(0);
      expect(child.signalCode).toBe('SIGKILL');
      if (seen < minCommits) throw new Error(`writer exited early: ${await new Response(child.stderr).text()}`);
      return last;
    },
  };
  return writer;
}
