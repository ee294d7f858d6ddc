/**
 * `polar tunnel --port P --socket S -- CMD…` through the CLI: CMD reaches the Unix socket S at 127.0.0.1:P, and the
 * tunnel exits with CMD's own status.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unusedPort } from '../support/fake-engine.ts';
import { runPolar } from '../support/polar-cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'polar-tunnel-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the command reaches the socket at --port and its exit status is the tunnel\'s', async () => {
  const socket = join(dir, 'gw.sock');
  const server = Bun.serve({ unix: socket, fetch: (req) => new Response(`socket saw ${new URL(req.url).pathname}`) });
  try {
    const port = unusedPort();
    const script = `const t = await (await fetch('http://127.0.0.1:${port}/v1/models')).text(); console.log(t); process.exit(7);`;
    const run = await runPolar(['tunnel', '--port', String(port), '--socket', socket, '--', process.execPath, '-e', script], { timeoutMs: 30_000 });
    expect(run.stdout).toContain('socket saw /v1/models');
    expect(run.code).toBe(7);
    const missing = await runPolar(['tunnel', '--port', String(port), '--socket', join(dir, 'none.sock'), '--', 'true']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('does not exist');
  } finally {
    await server.stop(true);
  }
});
