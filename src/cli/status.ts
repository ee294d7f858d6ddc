/**
 * `polar status --server URL` (or `--rollout-url URL` / `-c TOPOLOGY`, the Python Polar's spelling): tasks, sessions
 * and nodes of a rollout server (`GET /rollout/status`), or one task (`--task ID`, `GET /rollout/task/{id}`).
 */
import type { Command } from 'commander';
import { controlTokenFromEnv } from '../core/control-token.ts';
import { resolveRolloutUrl } from './rollout-url.ts';

interface NodeRow {
  node_id: string;
  gateway_url?: string;
  url?: string;
  healthy: boolean;
  draining: boolean;
  in_flight?: number;
  stages?: Record<string, number>;
  stages_stale?: boolean;
}

/** What a node's stage counts count (gateway/node.ts: queued → INIT → READY → RUNNING → POSTRUN). */
export const STAGE_LEGEND =
  'stages: queued = accepted, waiting for an INIT slot · init = sandbox, prepare, harness install · ready = waiting for a RUN slot · running = harness · postrun = trajectories, evaluation, teardown';

/** An error body's message: a string as is, an object's `message` (OpenAI / Anthropic shapes), else its JSON. */
function errorText(error: unknown): string {
  if (typeof error === 'string') return error;
  if (error && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message;
  return error === undefined ? '' : JSON.stringify(error);
}

/** `k=v k=v` of a count map, or `-`. */
function counts(o: unknown): string {
  return Object.entries((o ?? {}) as Record<string, number>).map(([k, v]) => `${k}=${v}`).join(' ') || '-';
}

/** Task counts by status from `task_counts`, else from the reference's `tasks: {task_id: status}` map. */
function taskCounts(body: Record<string, unknown>): Record<string, number> {
  if (body.task_counts && typeof body.task_counts === 'object') return body.task_counts as Record<string, number>;
  const out: Record<string, number> = {};
  for (const status of Object.values((body.tasks ?? {}) as Record<string, string>)) out[status] = (out[status] ?? 0) + 1;
  return out;
}

export function register(program: Command): void {
  program
    .command('status')
    .description('show the tasks, sessions and gateway nodes of a rollout server')
    .option('--server <url>', 'rollout server base URL')
    .option('--rollout-url <url>', 'same as --server (the Python Polar CLI flag)')
    .option('-c, --config <file>', 'topology file (ours or the Python Polar\'s) naming the rollout server, when no URL is given')
    .option('--task <id>', 'show one task with its sessions instead')
    .option('--json', 'print the raw JSON')
    .option('--token <token>', 'control-plane token (default: env POLAR_CONTROL_TOKEN or POLAR_CONTROL_PLANE_TOKEN)')
    .action(async (opts: { server?: string; rolloutUrl?: string; config?: string; task?: string; json?: boolean; token?: string }) => {
      const token = opts.token ?? controlTokenFromEnv();
      const base = resolveRolloutUrl(opts);
      const path = opts.task ? `/rollout/task/${encodeURIComponent(opts.task)}` : '/rollout/status';
      const response = await fetch(`${base}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} }).catch((error: Error) => {
        throw new Error(`cannot reach rollout server ${base}: ${error.message}`);
      });
      const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
      if (!response.ok) throw new Error(`${base}${path} answered HTTP ${response.status}: ${errorText(body.error ?? body.detail)} (is ${base} a polar rollout server?)`);
      if (opts.json || opts.task) {
        console.log(JSON.stringify(body, null, 2));
        return;
      }
      console.log(`rollout:  ${base}`);
      console.log(`tasks:    ${counts(taskCounts(body))}`);
      console.log(`sessions: ${counts(body.sessions)}`);
      console.log(`groups ready: ${String(body.groups_ready ?? 0)}`);
      const listed = body.nodes as { nodes?: NodeRow[] } | NodeRow[] | undefined;
      const nodes = (Array.isArray(listed) ? listed : listed?.nodes) ?? [];
      console.log(`nodes: ${nodes.length}`);
      for (const n of nodes) {
        const state = !n.healthy ? 'UNHEALTHY' : n.draining ? 'draining' : 'healthy';
        // An unhealthy node's last stage counts say nothing about now; the server reports them as stale.
        const stages = n.stages_stale ? 'stages=stale' : counts(n.stages);
        console.log(`  ${n.node_id.padEnd(16)} ${state.padEnd(9)} in_flight=${n.in_flight ?? 0} ${stages} ${n.gateway_url ?? n.url ?? ''}`);
      }
      // The node's stages are finer than the server's session statuses (a session queued on a node for an INIT slot
      // is INITIALIZING on the server): say what each counts.
      if (nodes.length > 0) console.log(`  ${STAGE_LEGEND}`);
    });
}
