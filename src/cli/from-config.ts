/**
 * The one mapping from the config file (src/config/sections/) to what the stack and a gateway node are built from:
 * `engineSpecFromConfig` for the `engine` section, `nodeSettingsFromConfig` for a `gateway.nodes` entry (capacity,
 * paths, and the runtime defaults: kind, image, isolation, network, limits, extra_args → run_args, binary → the runtime CLI),
 * `engineOutageFromConfig` for the `gateway` section's engine wait and handback.
 * `polar serve` and `polar gateway` both use them, so a documented key works the same in both.
 */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { EngineConfig } from '../config/sections/engine.ts';
import type { GatewayConfig, GatewayNodeConfig, RuntimeConfig } from '../config/sections/gateway.ts';
import { defaultHarnessCache } from '../gateway/harnesses/install.ts';
import type { GatewayCapacity } from '../gateway/node.ts';
import type { RuntimeSpec } from '../gateway/runtimes/index.ts';
import type { EngineSpec, SimEngineSettings } from '../stack/local-stack.ts';

/** The engine section as the stack's EngineSpec (timeout in ms, sampling defaults in camelCase). */
export function engineSpecFromConfig(engine: EngineConfig): EngineSpec & { timeoutMs: number } {
  const d = engine.default_sampling;
  return {
    kind: engine.kind, url: engine.url, ...(engine.urls.length > 0 ? { urls: engine.urls } : {}), mode: engine.mode, apiKey: engine.api_key ?? undefined,
    servedModel: engine.served_model ?? undefined, timeoutMs: engine.timeout_s * 1000,
    systemMessages: engine.system_messages === 'in_place' ? 'in-place' : engine.system_messages, stream: engine.stream,
    ...(engine.tokenizer !== null ? { tokenizerDir: engine.tokenizer } : {}),
    allowGoldenMismatch: engine.allow_golden_mismatch,
    defaults: { temperature: d.temperature, topP: d.top_p, topK: d.top_k, minP: d.min_p, ...(d.max_tokens !== null ? { maxTokens: d.max_tokens } : {}) },
  };
}

/**
 * The engine section's serving settings for the in-process simulator (`polar serve --with-sim`): sampling defaults,
 * timeout, streaming, golden-mismatch policy, and system_messages unless `auto` (the stack then picks in place for the
 * embedded Qwen3 template, merge for another tokenizer). Where the engine is (kind, url, urls, api_key, served_model)
 * is the simulator's own.
 */
export function simEngineFromConfig(engine: EngineConfig): SimEngineSettings {
  const { timeoutMs, defaults, stream, systemMessages, allowGoldenMismatch } = engineSpecFromConfig(engine);
  return { timeoutMs, defaults, stream, allowGoldenMismatch, ...(systemMessages !== 'auto' ? { systemMessages } : {}) };
}

/** A node's `runtime` section as the defaults under each task's runtime section. */
export function runtimeDefaultsFromConfig(rt: RuntimeConfig): Partial<RuntimeSpec> {
  return {
    kind: rt.kind,
    ...(rt.image ? { image: rt.image } : {}),
    isolation: rt.isolation,
    network: rt.network,
    ...(rt.read_only_paths.length > 0 ? { read_only_paths: rt.read_only_paths } : {}),
    ...(rt.limits.cpus !== null || rt.limits.memory !== null || rt.limits.pids !== null
      ? { limits: {
          ...(rt.limits.cpus !== null ? { cpus: rt.limits.cpus } : {}),
          ...(rt.limits.memory !== null ? { memory: rt.limits.memory } : {}),
          ...(rt.limits.pids !== null ? { pids: rt.limits.pids } : {}),
        } }
      : {}),
    ...(rt.extra_args.length > 0 ? { run_args: rt.extra_args } : {}),
    ...(rt.binary ? { binary: rt.binary } : {}),
  };
}

/** `gateway.upload_roots` as absolute paths (relative ones against `base`, the cwd). */
export function uploadRootsFromConfig(gateway: GatewayConfig, base = process.cwd()): string[] {
  return gateway.upload_roots.map((p) => resolve(base, p));
}

/**
 * The `gateway` section's engine-outage timings as GatewayNode / startLocalStack options, seconds → ms:
 * `engine_wait_s` → `engineWaitMs`, `engine_handback_s` → `engineHandbackMs` (null stays null: never hand back).
 */
export function engineOutageFromConfig(gateway: Pick<GatewayConfig, 'engine_wait_s' | 'engine_handback_s'>): { engineWaitMs: number; engineHandbackMs: number | null } {
  return {
    engineWaitMs: gateway.engine_wait_s * 1000,
    engineHandbackMs: gateway.engine_handback_s === null ? null : gateway.engine_handback_s * 1000,
  };
}

/** What a GatewayNode takes from its `gateway.nodes` entry. Relative paths resolve against `base` (the cwd). */
export function nodeSettingsFromConfig(node: GatewayNodeConfig, base = process.cwd()): {
  nodeId: string; host: string; port: number; publicUrl: string | undefined; capacity: GatewayCapacity; poolSizing: 'fixed' | 'auto';
  workRoot: string; harnessCacheDir: string; runtimeDefaults: Partial<RuntimeSpec>; keepFinishedSessions: number;
} {
  return {
    nodeId: node.node_id, host: node.host, port: node.port, publicUrl: node.public_url ?? undefined,
    capacity: { init_workers: node.init_workers, ready_buffer: node.ready_buffer, max_run_workers: node.max_run_workers, postrun_workers: node.postrun_workers },
    poolSizing: node.pool_sizing,
    workRoot: resolve(base, expandHome(node.work_root)),
    harnessCacheDir: node.harness_cache_dir === null ? defaultHarnessCache() : resolve(base, expandHome(node.harness_cache_dir)),
    runtimeDefaults: runtimeDefaultsFromConfig(node.runtime),
    keepFinishedSessions: node.keep_finished_sessions,
  };
}

/** `~` or `~/x` → the home directory (config files are written by hand; the shell does not expand them). */
function expandHome(path: string): string {
  return path === '~' ? homedir() : path.startsWith('~/') ? join(homedir(), path.slice(2)) : path;
}
