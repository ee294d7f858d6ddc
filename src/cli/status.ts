/** `polar status --server URL`: tasks, sessions and nodes of a rollout server (`GET /rollout/status`). */
import type { Command } from 'commander';
import { controlTokenFromEnv } from '../core/control-token.ts';

export function register(program: Command): void {
  program
    .command('status')
    .description('show the tasks, sessions and gateway nodes of a rollout server')
    .requiredOption('--server <url>', 'rollout server base URL')
    .option('--task <id>', 'show one task with its sessions instead')
    .option('--json', 'print the raw JSON')
    .option('--token <token>', 'control-plane token (default: env POLAR_CONTROL_TOKEN or POLAR_CONTROL_PLANE_TOKEN)')
    .action(async (opts: { server: string; task?: string; json?: boolean; token?: string }) => {
      const token = opts.token ?? controlTokenFromEnv();
      const base = opts.server.replace(/\/+$/, '');
      const path = opts.task ? `/rollout/task/${encodeURIComponent(opts.task)}` : '/rollout/status';
      const response = await fetch(`${base}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} }).catch((error: Error) => {
        throw new Error(`cannot reach rollout server ${opts.server}: ${error.message}`);
      });
      const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
      if (!response.ok) throw new Error(`HTTP ${response.status}: ${String(body.error ?? '')}`);
      if (opts.json || opts.task) {
        console.log(JSON.stringify(body, null, 2));
        return;
      }
      const counts = (o: unknown) => Object.entries((o ?? {}) as Record<string, number>).map(([k, v]) => `${k}=${v}`).join(' ') || '-';
      console.log(`tasks:    ${counts(body.tasks)}`);
      console.log(`sessions: ${counts(body.sessions)}`);
      console.log(`groups ready: ${String(body.groups_ready ?? 0)}`);
      const nodes = (body.nodes ?? []) as { node_id: string; url: string; healthy: boolean; draining: boolean; in_flight: number; stages: Record<string, number>; stages_stale?: boolean }[];
      console.log(`nodes: ${nodes.length}`);
      for (const n of nodes) {
        const state = n.draining ? 'draining' : n.healthy ? 'healthy' : 'UNHEALTHY';
        // An unhealthy node's last stage counts say nothing about now; the server reports them as stale.
        const stages = n.stages_stale ? 'stages=stale' : counts(n.stages);
        console.log(`  ${n.node_id.padEnd(16)} ${state.padEnd(9)} in_flight=${n.in_flight} ${stages} ${n.url}`);
      }
    });
}
