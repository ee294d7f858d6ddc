/**
 * `polar config import`: a topology file of the Python Polar (NVIDIA-NeMo/ProRL-Agent-Server
 * `src/polar/config/topology.py` TopologyConfig) converted into ours. Its schema is strict like ours: an unknown key is
 * an error naming its path. Keys with no counterpart here are left out with a note saying why; nothing is dropped
 * without one.
 */
import { z } from 'zod';
import { formatPath } from './load.ts';

const inference = z.strictObject({ engine: z.enum(['sglang', 'vllm']).default('sglang'), base_url: z.string().default('http://127.0.0.1:8000') });

const modelPool = z.strictObject({ alias: z.string(), model: z.string(), base_url: z.string(), api_key_env: z.string(), max_concurrency: z.number().int().positive().optional() });

const runtimeSpec = z.looseObject({ backend: z.enum(['docker', 'apptainer']).default('docker'), image: z.string().min(1) });

const node = z.strictObject({
  id: z.string().min(1).optional(),
  host: z.string().min(1).default('0.0.0.0'),
  port: z.number().int().min(1).max(65535).default(8081),
  public_url: z.string().nullish(),
  model_served: z.string().default(''),
  inference: inference.prefault({}),
  model_pool: z.array(modelPool).default([]),
  max_init_workers: z.number().int().positive().default(4),
  max_run_workers: z.number().int().positive().default(2),
  max_postrun_workers: z.number().int().positive().default(4),
  default_runtime: runtimeSpec.nullish(),
});

const referenceTopology = z.strictObject({
  rollout: z
    .strictObject({
      host: z.string().min(1).default('0.0.0.0'),
      port: z.number().int().min(1).max(65535).default(8080),
      public_url: z.string().nullish(),
      save_dir: z.string().nullish(),
      dispatch_poll_interval_seconds: z.number().positive().optional(),
      callback_grace_seconds: z.number().min(0).optional(),
      http_max_connections: z.number().int().positive().optional(),
      http_max_keepalive_connections: z.number().int().min(0).optional(),
      cleanup_max_concurrency: z.number().int().positive().optional(),
      cleanup_max_attempts: z.number().int().positive().optional(),
      cleanup_retry_backoff_seconds: z.number().min(0).optional(),
    })
    .prefault({}),
  gateway: z.strictObject({
    heartbeat_interval_seconds: z.number().int().positive().default(30),
    rollout_server_url: z.string().nullish(),
    nodes: z.array(node).min(1),
    completion_persistence: z.record(z.string(), z.unknown()).optional(),
  }),
});

/** The import result: our config as plain data (validate with resolveConfig) and one note per key left out or changed. */
export interface ImportedTopology {
  config: Record<string, unknown>;
  notes: string[];
}

export class ReferenceTopologyError extends Error {
  constructor(readonly issues: string[]) {
    super(`not a reference topology:\n  ${issues.join('\n  ')}`);
  }
}

function defaultPublicUrl(host: string, port: number): string {
  return `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`;
}

/**
 * Convert a parsed reference topology (the YAML's data) into our config.
 * @throws ReferenceTopologyError listing every unknown key / bad value (`path: message`), and what cannot be expressed
 *   here (model pools, nodes on different engines).
 */
export function importReferenceTopology(raw: unknown): ImportedTopology {
  const parsed = referenceTopology.safeParse(raw ?? {});
  if (!parsed.success) throw new ReferenceTopologyError(parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`));
  const ref = parsed.data;
  const notes: string[] = [];
  const problems: string[] = [];
  const r = ref.rollout;
  const rolloutUrl = (r.public_url || defaultPublicUrl(r.host, r.port)).replace(/\/+$/, '');
  if (r.public_url) notes.push(`rollout.public_url: not a key here; gateway.rollout_url is set to it (${rolloutUrl})`);
  if (r.save_dir) notes.push('rollout.save_dir: left out; results live in the SQLite store (rollout.db / store.path), `polar export` writes JSONL/Parquet');
  for (const key of ['dispatch_poll_interval_seconds', 'callback_grace_seconds', 'http_max_connections', 'http_max_keepalive_connections', 'cleanup_max_concurrency', 'cleanup_max_attempts', 'cleanup_retry_backoff_seconds'] as const) {
    if (r[key] !== undefined) notes.push(`rollout.${key}: left out; no counterpart (dispatch is event-driven, node calls are retried with backoff)`);
  }
  if (ref.gateway.completion_persistence) notes.push('gateway.completion_persistence: left out; completions are written to SQLite before the response is sent');

  const engines = new Set(ref.gateway.nodes.map((n) => `${n.inference.engine} ${n.inference.base_url}`));
  if (engines.size > 1) problems.push(`gateway.nodes[].inference: the nodes use ${engines.size} different engines; this topology has one engine section for every node`);
  const served = new Set(ref.gateway.nodes.map((n) => n.model_served).filter(Boolean));
  if (served.size > 1) problems.push('gateway.nodes[].model_served: the nodes serve different models; engine.served_model is one name');
  const nodes = ref.gateway.nodes.map((n, i) => {
    if (n.model_pool.length > 0) problems.push(`gateway.nodes[${i}].model_pool: model pools (pool/ aliases) are not supported`);
    const id = n.id ?? `node-${i}`;
    const nodeId = id.replace(/[^A-Za-z0-9._-]/g, '-');
    if (nodeId !== id) notes.push(`gateway.nodes[${i}].id: ${JSON.stringify(id)} became node_id ${JSON.stringify(nodeId)} (letters, digits, ".", "_", "-" only)`);
    if (n.id === undefined) notes.push(`gateway.nodes[${i}].id: unset (the reference uses the host name); node_id ${JSON.stringify(nodeId)}`);
    const out: Record<string, unknown> = {
      node_id: nodeId,
      host: n.host,
      port: n.port,
      public_url: (n.public_url || defaultPublicUrl(n.host, n.port)).replace(/\/+$/, ''),
      init_workers: n.max_init_workers,
      max_run_workers: n.max_run_workers,
      postrun_workers: n.max_postrun_workers,
    };
    const rt = n.default_runtime;
    if (rt) {
      out.runtime = { kind: rt.backend, image: rt.image };
      const rest = Object.keys(rt).filter((k) => k !== 'backend' && k !== 'image');
      if (rest.length > 0) notes.push(`gateway.nodes[${i}].default_runtime: ${rest.join(', ')} left out; a node runtime here has kind and image (tasks carry runtime.prepare, runtime.network, runtime.work_dir)`);
    }
    return out;
  });
  if (problems.length > 0) throw new ReferenceTopologyError(problems);

  const first = ref.gateway.nodes[0]!;
  const engine: Record<string, unknown> = { kind: first.inference.engine, url: first.inference.base_url.replace(/\/+$/, '') };
  if (first.model_served) engine.served_model = first.model_served;
  const config: Record<string, unknown> = {
    engine,
    rollout: { host: r.host, port: r.port },
    gateway: {
      nodes,
      rollout_url: (ref.gateway.rollout_server_url || rolloutUrl).replace(/\/+$/, ''),
      heartbeat_interval_s: ref.gateway.heartbeat_interval_seconds,
    },
  };
  if (r.host !== '127.0.0.1' || ref.gateway.nodes.some((n) => n.host !== '127.0.0.1')) {
    notes.push('non-loopback listen addresses: `polar serve` / `rollout` / `gateway` refuse them without a control-plane token; export POLAR_CONTROL_PLANE_TOKEN (or POLAR_CONTROL_TOKEN) on every host');
  }
  return { config, notes };
}
