/**
 * A hostile harness (test/fixtures/hostile-harness/attack.py) run through a real gateway node next to a victim
 * session, on the local runtime (bubblewrap) and on podman: it tries to read the store, the config, the control-plane
 * token (env and /proc), the victim's work dir and completions, to use the session API, to write outside its dir, to
 * reach the network beyond the gateway, to leave a process behind and to exhaust memory and PIDs. Every attempt must
 * fail, and both sessions' own work must still complete (a captured model call, an evaluator reward of 1).
 * Runs in a loopback-only network namespace (`npm test`); needs bubblewrap, and podman + runc + busybox-static for the
 * podman half.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TaskRequest } from '../../src/core/records.ts';
import { createEngineClient } from '../../src/engines/index.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import type { RuntimeSpec } from '../../src/gateway/runtimes/index.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { SimServer } from '../../src/sim/server.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { NEEDS_ISOLATION, networkIsolated } from '../support/isolation.ts';
import { HOST_USR, PODMAN_SKIP, podmanReady, TEST_IMAGE } from '../support/podman.ts';

const ATTACK = resolve(import.meta.dir, '../fixtures/hostile-harness/attack.py');
const isolated = networkIsolated();
const hasBwrap = Bun.which('bwrap') !== null;
const ATTACKS = [
  'read-store', 'read-config', 'read-victim-dir', 'token-env', 'token-proc', 'host-processes-visible',
  'victim-completions-and-session-api', 'write-usr', 'network-beyond-gateway', 'exhaust-memory', 'exhaust-pids',
];

/** Host pids whose command line holds `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) found.push(Number(pid));
    } catch { /* gone */ }
  }
  return found;
}

function suite(kind: 'local' | 'podman', runtime: Partial<RuntimeSpec>, skip: string | null) {
  describe(`hostile harness on ${kind}`, () => {
    const root = mkdtempSync(join(tmpdir(), `polar-hostile-${kind}-`));
    const token = `tok-${crypto.randomUUID()}`;
    const marker = crypto.randomUUID().slice(0, 12);
    let sim: SimServer;
    let store: Store;
    let node: GatewayNode;
    let probe: ReturnType<typeof Bun.serve>;
    const savedToken = process.env.POLAR_CONTROL_TOKEN;

    beforeAll(async () => {
      if (skip !== null) return;
      // The serving process holds the token in its environment, as `polar serve` does.
      process.env.POLAR_CONTROL_TOKEN = token;
      writeFileSync(join(root, 'polar.yaml'), `rollout:\n  control_plane_token: ${token}\n`);
      probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('reached') });
      sim = await SimServer.start({ decodeTps: 0, prefillTps: 0 });
      store = openStore(join(root, 'polar.db'));
      const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'chat', timeoutMs: 30_000 });
      node = new GatewayNode({
        nodeId: `hostile-${kind}`, store, workRoot: join(root, 'work'), controlPlaneToken: token, runtimeDefaults: runtime,
        proxy: (sessions, control) => createProxyApp({ engine, store, sessions, options: { adminToken: control.adminToken } }),
      });
      await node.start();
    });
    afterAll(async () => {
      if (skip !== null) return;
      await node.stop();
      await sim.stop();
      probe.stop(true);
      store.close();
      if (savedToken === undefined) delete process.env.POLAR_CONTROL_TOKEN;
      else process.env.POLAR_CONTROL_TOKEN = savedToken;
      rmSync(root, { recursive: true, force: true });
    });

    const task = (id: string, command: string, evaluator: string, prepare: NonNullable<TaskRequest['runtime']>['prepare'] = []): TaskRequest => ({
      task_id: id, instruction: 'work', num_samples: 1, timeout_seconds: 90,
      agent: { harness: 'shell', command, model_name: 'qwen3-sim' }, builder: { strategy: 'per_request' },
      // The task names its kind, image and uploads; the limits are the node's (runtimeDefaults).
      runtime: { kind, ...(runtime.image ? { image: runtime.image } : {}), ...(runtime.run_args ? { run_args: runtime.run_args } : {}), prepare },
      evaluator: { strategy: 'test_on_output', config: { command: evaluator, expect_exit_code: 0 } },
    });

    test.skipIf(skip !== null)(`every attempt fails and both sessions still complete their work ${skip ?? NEEDS_ISOLATION}`, async () => {
      const victimId = `victim-${crypto.randomUUID()}`;
      const attackerId = `attacker-${crypto.randomUUID()}`;
      const victimDir = join(root, 'work', `s-${createHash('sha256').update(victimId).digest('hex').slice(0, 20)}`, 'work');
      const targets = {
        store: join(root, 'polar.db'), config: join(root, 'polar.yaml'), token, victim_id: victimId, victim_dir: victimDir,
        outside_dir: root, probe_port: probe.port, marker,
      };
      const targetsFile = join(root, `targets-${attackerId}.json`);
      writeFileSync(targetsFile, JSON.stringify(targets));
      const victimCall = `python3 -c "import json,os,urllib.request as u;u.urlopen(u.Request(os.environ['OPENAI_BASE_URL']+'/chat/completions',data=json.dumps({'model':'m','messages':[{'role':'user','content':'victim'}],'max_tokens':8}).encode(),headers={'content-type':'application/json','authorization':'Bearer '+os.environ['OPENAI_API_KEY']})).read()"`;
      node.dispatch({ session_id: victimId, sample_index: 0, task: task('victim', `echo victim-secret > secret.txt && ${victimCall} && sleep 6 && echo kept >> secret.txt`, 'grep -qx kept secret.txt') });
      node.dispatch({
        session_id: attackerId, sample_index: 0,
        task: task('attacker', 'python3 attack.py targets.json', 'grep -q "own work done: True" own-work.txt', [
          { upload_file: { src: ATTACK, dest: 'attack.py' } }, { upload_file: { src: targetsFile, dest: 'targets.json' } },
        ]),
      });
      const [victim, attacker] = await Promise.all([node.wait(victimId), node.wait(attackerId)]);
      const captured = store.completions.listBySession(attackerId);
      const report = JSON.stringify(captured).replaceAll('\\n', '\n');
      const detail = JSON.stringify({ attacker: { status: attacker!.status, error: attacker!.error, eval: attacker!.trajectory.metadata.evaluation }, report });
      // Own work: both completed, were evaluated 1, and their model calls were captured.
      expect(attacker!.status, detail).toBe('COMPLETED');
      expect(attacker!.trajectory.metadata.evaluation?.outcome_reward, detail).toBe(1);
      expect(captured.length).toBe(1);
      expect(victim!.status).toBe('COMPLETED');
      expect(victim!.trajectory.metadata.evaluation?.outcome_reward).toBe(1);
      expect(store.completions.listBySession(victimId).length).toBe(1);
      // Every attack ran and was blocked.
      for (const name of ATTACKS) expect(report, name).toMatch(new RegExp(`ATTACK ${name} blocked`));
      expect(report).not.toContain('LEAKED');
      // Nothing was written outside, and nothing was left running on the host.
      expect(existsSync(join(root, `pwned-${marker}`))).toBe(false);
      expect(existsSync(`/usr/pwned-${marker}`)).toBe(false);
      expect(existsSync(`/etc/pwned-${marker}`)).toBe(false);
      expect(processesWith(`leftover-${marker}`)).toEqual([]);
    });
  });
}

const localSkip = !isolated ? NEEDS_ISOLATION : !hasBwrap ? '(skipped: bubblewrap not installed)' : null;
suite('local', { kind: 'local', limits: { memory: '256m', pids: 64 } }, localSkip);
const podmanSkip = !isolated ? NEEDS_ISOLATION : !podmanReady() ? PODMAN_SKIP : null;
suite('podman', { kind: 'podman', image: TEST_IMAGE, run_args: HOST_USR, limits: { memory: '256m', pids: 64 } }, podmanSkip);
