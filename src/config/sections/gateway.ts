/** `gateway`: gateway nodes (pools INIT → READY → RUNNING → POSTRUN, runtimes, harness cache). docs/architecture.md#staging-model. */
import { z } from 'zod';
import { parseMemory } from '../../gateway/runtimes/limits.ts';

/** Sandbox runtime of a node. One object for every kind; fields a kind does not use are ignored by it. */
export const runtimeSchema = z
  .strictObject({
    /** Where sessions run. */
    kind: z.enum(['local', 'docker', 'podman', 'apptainer']).default('local').describe('Sandbox kind: local (work dir + process group, bubblewrap when present), docker, podman or apptainer.'),
    /** Container image for docker/podman/apptainer when the task names none. */
    image: z.string().min(1).nullable().default(null).describe('Default container image (docker/podman) or SIF file (apptainer) when a task names none.'),
    /** Path or name of the runtime CLI; null = the kind's own name on PATH. */
    binary: z.string().min(1).nullable().default(null).describe('Runtime CLI to call; null uses the kind name (docker, podman, apptainer) from PATH.'),
    /** local only: the sandbox. */
    isolation: z.enum(['bwrap', 'none']).default('bwrap').describe('local only: bwrap runs each session in a bubblewrap sandbox (own work dir, read-only /usr and harness installs, own PID/network namespaces; refused when bwrap is missing); none runs harnesses as plain host processes (trusted tasks only).'),
    /** Network of every sandbox. */
    network: z.enum(['none', 'gateway', 'host']).default('gateway').describe('Sandbox network: gateway = loopback only plus a tunnel to this node\'s model API; none = loopback only; host = the host\'s network. A task may tighten it, never loosen it.'),
    /** Host paths every sandbox sees read-only. */
    read_only_paths: z.array(z.string().min(1)).default([]).describe('Host paths every sandbox sees read-only at the same path (a tool, a dataset); the harness installs are always there.'),
    /** Resource limits per sandbox. */
    limits: z
      .strictObject({
        cpus: z.number().positive().nullable().default(null).describe('CPUs a sandbox may use (fractions allowed); null = unlimited.'),
        memory: z
          .union([z.number().int().positive(), z.string().min(1)])
          .nullable()
          .default(null)
          // The runtime's own parser, so a value it would refuse at every dispatch is refused here instead.
          .superRefine((m, ctx) => {
            if (m === null) return;
            try {
              parseMemory(m);
            } catch (error) {
              ctx.addIssue({ code: 'custom', message: (error as Error).message });
            }
          })
          .describe('Memory a sandbox may use (bytes, or a number with k, m, g or t: 512m, 2g, 2GiB); null = unlimited. Beyond it the kernel kills the biggest process of the sandbox.'),
        pids: z.number().int().positive().nullable().default(null).describe('Processes and threads a sandbox may run at once; null = unlimited.'),
      })
      .prefault({})
      .describe('Resource limits of each sandbox (cgroups for local, --cpus/--memory/--pids-limit for docker and podman; apptainer ignores them).'),
    /** Extra CLI arguments for `run`/`exec` of container runtimes. */
    extra_args: z.array(z.string()).default([]).describe('Extra arguments passed to the container CLI when a sandbox starts.'),
  })
  .describe('Sandbox runtime for the sessions of this node.');

/** One gateway node. */
export const gatewayNodeSchema = z
  .strictObject({
    /** Unique node name; `polar gateway --node-id` picks one. */
    node_id: z.string().regex(/^[A-Za-z0-9._-]+$/, 'node_id may hold only letters, digits, ".", "_" and "-"').default('local').describe('Unique name of the node; `polar gateway --node-id ID` selects it.'),
    /** Listen address of the node (sessions API + proxy). */
    host: z.string().min(1).default('127.0.0.1').describe('Listen address of the node: the sessions API and the proxy the harnesses call.'),
    /** Listen port; 0 picks a free one. */
    port: z.number().int().min(0).max(65535).default(8090).describe('Listen port of the node; 0 picks a free port. Two nodes without public_url may not listen on one host and port (0.0.0.0 and :: include loopback), nor a node without public_url on the rollout server\'s; two nodes may not share a public_url.'),
    /** URL the rollout server and harnesses use to reach the node; null = http://host:port. */
    public_url: z.url().nullable().default(null).describe('URL by which the rollout server reaches this node; null uses http://host:port.'),
    /** Concurrent INIT workers (runtime start + prepare actions). */
    init_workers: z.number().int().positive().default(4).describe('Sessions prepared at once in INIT (runtime start and prepare actions).'),
    /** Prepared sessions kept waiting; INIT stops pulling when full. */
    ready_buffer: z.number().int().min(0).default(4).describe('Prepared sessions kept in READY; INIT pauses while it is full.'),
    /** Harnesses running at once; this sizes the engine load. */
    max_run_workers: z.number().int().positive().default(8).describe('Harness runs at once (RUNNING); this sizes the load on the engine.'),
    /** Concurrent POSTRUN workers (build, evaluate, callback, teardown). */
    postrun_workers: z.number().int().positive().default(4).describe('Sessions finished at once in POSTRUN (build, evaluate, callback, teardown).'),
    /** fixed: init_workers and ready_buffer as given; auto: sized from observed INIT and RUN times, those as maxima. */
    pool_sizing: z.enum(['fixed', 'auto']).default('fixed').describe('`fixed` uses init_workers and ready_buffer as given; `auto` sizes both from observed INIT and RUN times (ceil(1.5 × max_run_workers × INIT / RUN) + 1, Little\'s law with headroom) with the configured values as upper bounds.'),
    runtime: runtimeSchema.prefault({}),
    /** npm install prefix for pinned harness CLIs (`<dir>/<pkg>@<version>`). */
    harness_cache_dir: z.string().min(1).nullable().default(null).describe('Directory where pinned harness CLIs are installed, one `<pkg>@<version>` folder each; null uses $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses (the cache every polar command shares). A relative path resolves against the directory polar starts in, never a session\'s work directory.'),
    /** Finished sessions kept whole in memory (GatewayNodeOptions.keepFinishedSessions). */
    keep_finished_sessions: z.number().int().nonnegative().default(256).describe('Finished sessions a node keeps whole in memory, most recent first. An older one whose result is stored and delivered leaves memory (its trajectory can be megabytes); GET /sessions/{id}, GET /sessions and a repeated dispatch still know it (the last 65,536), reading its result back from the node\'s store.'),
    /** Parent of per-session work directories and HOMEs. */
    work_root: z.string().min(1).default('.polar/work').describe('Parent directory of the per-session work directories and HOMEs; a relative path resolves against the directory polar starts in. A gateway starting here removes what a dead one left (its process groups and directories).'),
  })
  .describe('One gateway node.');

/** The `gateway` section. */
export const gatewaySchema = z
  .strictObject({
    /** Nodes in this topology; `polar serve` runs the first one in-process. */
    nodes: z
      .array(gatewayNodeSchema)
      .min(1)
      .default([gatewayNodeSchema.parse({})])
      .superRefine((nodes, ctx) => {
        const seen = new Set<string>();
        nodes.forEach((node, index) => {
          if (seen.has(node.node_id)) ctx.addIssue({ code: 'custom', path: [index, 'node_id'], message: `duplicate node_id ${JSON.stringify(node.node_id)}` });
          seen.add(node.node_id);
        });
      })
      .describe('Gateway nodes of this topology; `polar serve` runs the first, `polar gateway --node-id` the named one.'),
    /** Rollout server a node registers with; null = none (in-process use by `polar serve`/`polar run`). */
    rollout_url: z.url().nullable().default(null).describe('Rollout server a standalone node registers with and heartbeats to; null for none (`polar serve` wires the local node in-process).'),
    /** Where prepare uploads may read from, besides a task file's own directory. */
    upload_roots: z.array(z.string().min(1)).default([]).describe('Host directories a TaskRequest\'s upload_file/upload_dir src may lie in (symlinks resolved); a task loaded from a file may also use its own directory. Anything else is refused with 400 at submit.'),
    /** Seconds between heartbeats to the rollout server. */
    heartbeat_interval_s: z.number().positive().default(5).describe('Seconds between a node\'s heartbeats to the rollout server.'),
    /** How long a session waits for a down engine (GatewayNodeOptions.engineWaitMs). */
    engine_wait_s: z.number().nonnegative().default(600).describe('Seconds a session that has not started waits for a down engine (the node\'s periodic engine check, every 10 s, or a check after a session failed says so) before it ends ERROR with "engine down: …" (an infrastructure failure `polar run --max-retries` re-runs). While the engine is down a node starts no queued session (INIT) and no READY one (RUNNING); a READY session\'s timeout_seconds does not run while it waits; running sessions go on.'),
    /** How long the engine is down before waiting sessions go back to the rollout server (GatewayNodeOptions.engineHandbackMs). */
    engine_handback_s: z.number().nonnegative().nullable().default(60).describe('Seconds a session that has not started (queued, or READY with no harness started) waits for a down engine before its node gives it back to the rollout server (`POST /nodes/{id}/handback`), which dispatches it to another node, or to this one once its engine is back: same session and sample, attempt + 1, no failed result; a READY sandbox is torn down. The server takes nothing back while no other node could run it (healthy, not draining, engine up): those keep waiting, up to engine_wait_s, and are offered again every 10 s. Only for a node with a rollout server (rollout_url, or `polar serve`\'s own node); null never hands back. Must be below engine_wait_s unless null (a config error otherwise: the session would end ERROR first).'),
  })
  // A session that waits engine_wait_s ends ERROR at the node's check before the handback would be offered at the
  // same check (src/gateway/node.ts engineWaitTick), so a handback delay at or past it could never hand anything back.
  .superRefine((gateway, ctx) => {
    const issue = handbackAfterWait(gateway);
    if (issue) ctx.addIssue({ code: 'custom', ...issue });
  })
  .describe('Gateway nodes: sandboxes, harness runs and trajectory building.');

/** A config problem found across fields: where it is and what is wrong. */
export interface CrossFieldIssue {
  path: Array<string | number>;
  message: string;
}

/**
 * `gateway.engine_handback_s` at or above `gateway.engine_wait_s`: waiting sessions would end ERROR before their node
 * could hand them back. Null (never hand back) is always allowed. The path is relative to the `gateway` section.
 */
export function handbackAfterWait(gateway: { engine_wait_s: number; engine_handback_s: number | null }): CrossFieldIssue | null {
  const { engine_wait_s: wait, engine_handback_s: handback } = gateway;
  // A negative value has its own issue at its own path (zod runs this refinement anyway); one problem, one message.
  if (handback === null || handback < wait || !(wait >= 0) || !(handback >= 0)) return null;
  return {
    path: ['engine_handback_s'],
    message: `${handback} s is not below gateway.engine_wait_s (${wait} s): a session waiting for a down engine ends ERROR after gateway.engine_wait_s before it could be handed back; make gateway.engine_handback_s smaller than gateway.engine_wait_s, or null to never hand back`,
  };
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]', '']);
const LOOPBACK_HOSTS = new Set(['localhost', '::1', '[::1]']);

function normalHost(host: string): string {
  const h = host.trim().toLowerCase();
  return h === 'localhost' ? '127.0.0.1' : h;
}

/** True when sockets bound on `a` and `b` (same port) would collide on one machine. */
function hostsOverlap(a: string, b: string): boolean {
  const [x, y] = [normalHost(a), normalHost(b)];
  if (x === y) return true;
  const local = (h: string) => WILDCARD_HOSTS.has(h) || LOOPBACK_HOSTS.has(h) || h.startsWith('127.');
  return (WILDCARD_HOSTS.has(x) && local(y)) || (WILDCARD_HOSTS.has(y) && local(x));
}

/** `host:port` of a URL (its scheme's default port when it names none). */
function urlAddress(url: string): string {
  const u = new URL(url);
  return `${u.hostname.toLowerCase()}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

/**
 * Two listeners on one address, which the first bind or the rollout server's routing would trip over at run time:
 * nodes without public_url (reached at http://host:port, so on one machine) on one port with overlapping hosts, a node
 * without public_url on the rollout server's port, and two nodes with the same public_url. Port 0 (a free port) never
 * clashes. Paths are from the config root.
 */
export function addressClashes(gateway: GatewayConfig, rollout: { host: string; port: number }): CrossFieldIssue[] {
  const issues: CrossFieldIssue[] = [];
  const nodePath = (i: number) => `gateway.nodes[${i}]`;
  gateway.nodes.forEach((node, i) => {
    if (node.public_url === null && node.port !== 0) {
      const other = gateway.nodes.findIndex((o, j) => j < i && o.public_url === null && o.port === node.port && hostsOverlap(o.host, node.host));
      if (other >= 0) {
        issues.push({
          path: ['gateway', 'nodes', i, 'port'],
          message: `${node.host}:${node.port} is also the address of ${nodePath(other)} (${nodePath(other)}.host, ${nodePath(other)}.port); give each node its own port, or a public_url when they run on different machines`,
        });
      }
      if (rollout.port === node.port && hostsOverlap(rollout.host, node.host)) {
        issues.push({
          path: ['gateway', 'nodes', i, 'port'],
          message: `${node.host}:${node.port} is also the address of the rollout server (rollout.host, rollout.port); give the node another port`,
        });
      }
    }
    if (node.public_url !== null) {
      const address = urlAddress(node.public_url);
      const other = gateway.nodes.findIndex((o, j) => j < i && o.public_url !== null && urlAddress(o.public_url) === address);
      if (other >= 0) {
        issues.push({
          path: ['gateway', 'nodes', i, 'public_url'],
          message: `${address} is also the public_url of ${nodePath(other)} (${nodePath(other)}.public_url); each node needs its own address`,
        });
      }
    }
  });
  return issues;
}

export type RuntimeConfig = z.output<typeof runtimeSchema>;
export type GatewayNodeConfig = z.output<typeof gatewayNodeSchema>;
export type GatewayConfig = z.output<typeof gatewaySchema>;
