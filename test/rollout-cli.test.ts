/**
 * `polar rollout --config`, `polar submit` and `polar status` as separate processes: the server starts from a config
 * file, a task directory is submitted and expanded into sessions, status reports them; bad usage exits 2.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dir, '..');
const bun = join(root, 'node_modules/.bin/bun');
const scratch = mkdtempSync(join(tmpdir(), 'polar-rollout-cli-'));
const procs: ReturnType<typeof Bun.spawn>[] = [];
afterAll(() => {
  for (const p of procs) p.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split('\n')[0]!;
}

test('rollout + submit + status over the CLI', async () => {
  const config = join(scratch, 'polar.yaml');
  writeFileSync(config, `rollout:\n  port: 0\nstore:\n  path: ${join(scratch, 'rollout.db')}\n`);
  const server = Bun.spawn([bun, 'src/main.ts', 'rollout', '--config', config], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  procs.push(server);
  const line = await firstLine(server.stdout as ReadableStream<Uint8Array>);
  const url = line.match(/http:\/\/\S+/)?.[0];
  expect(url).toBeDefined();

  const submit = Bun.spawnSync([bun, 'src/main.ts', 'submit', 'examples/tasks', '--server', url!, '--harness', 'shell', '--samples', '2'], { cwd: root });
  expect(submit.stderr.toString()).toBe('');
  expect(submit.exitCode).toBe(0);
  const accepted = submit.stdout.toString().trim().split('\n').map((l) => JSON.parse(l) as { task_id: string; sessions: number });
  expect(accepted.length).toBeGreaterThanOrEqual(5);
  expect(accepted.every((a) => a.sessions === 2)).toBe(true);

  const status = Bun.spawnSync([bun, 'src/main.ts', 'status', '--server', url!, '--json'], { cwd: root });
  expect(status.exitCode).toBe(0);
  const body = JSON.parse(status.stdout.toString()) as { tasks: Record<string, number>; sessions: Record<string, number> };
  expect(body.tasks.RUNNING).toBe(accepted.length);
  expect(body.sessions.REGISTERED).toBe(accepted.length * 2); // no node registered yet: all queued

  const noAgent = Bun.spawnSync([bun, 'src/main.ts', 'submit', 'examples/tasks', '--server', url!], { cwd: root });
  expect(noAgent.exitCode).toBe(2);
  expect(noAgent.stderr.toString()).toContain('agent');
  server.kill('SIGTERM');
  expect(await server.exited).toBe(0);
});

test('a bad config exits 2 and names the field', () => {
  const config = join(scratch, 'bad.yaml');
  writeFileSync(config, 'rollout:\n  port: -5\n');
  const proc = Bun.spawnSync([bun, 'src/main.ts', 'rollout', '--config', config], { cwd: root });
  expect(proc.exitCode).toBe(2);
  expect(proc.stderr.toString()).toContain('rollout.port');
});
