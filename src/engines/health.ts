/**
 * Engine reachability: a cheap liveness check, a start-up wait, and a monitor that `GET /health` of the rollout server
 * and of gateway nodes report as `engine: {ok, error}`.
 */
import { engineBaseUrl, engineFetchJson } from './http.ts';

/** Engine reachability as last checked. */
export interface EngineHealth {
  ok: boolean;
  /** Why the last check failed; null when ok. */
  error: string | null;
}

/** One liveness check of an engine; resolves when it answered, throws Error (GatewayError) saying why not. */
export type EngineCheck = () => Promise<void>;

/**
 * A cheap liveness check: `GET {url}/v1/models` (served by vLLM, SGLang, llama.cpp's server, OpenAI and the simulator),
 * with the engine's bearer key, bounded by `timeoutMs` (default 5000 ms).
 * Source: https://platform.openai.com/docs/api-reference/models/list
 */
export function engineLivenessCheck(spec: { kind?: string; url: string; apiKey?: string }, timeoutMs = 5000): EngineCheck {
  const base = engineBaseUrl(spec.url);
  const headers: Record<string, string> = spec.apiKey ? { authorization: `Bearer ${spec.apiKey}` } : {};
  return async () => {
    await engineFetchJson(`${base}/v1/models`, { method: 'GET' }, { timeoutMs, headers }, 'GET /v1/models');
  };
}

/**
 * Liveness of an engine given as `url` or as replicas `urls`: up when any replica answers `GET /v1/models` (each
 * replica's own health is tracked by the router, replicas.ts). Throws the first replica's error when none answers.
 */
export function engineReplicasLivenessCheck(spec: { kind?: string; url: string; urls?: string[]; apiKey?: string }, timeoutMs = 5000): EngineCheck {
  const urls = spec.urls && spec.urls.length > 0 ? spec.urls : [spec.url];
  const checks = urls.map((url) => engineLivenessCheck({ ...spec, url }, timeoutMs));
  return async () => {
    try {
      await Promise.any(checks.map((check) => check()));
    } catch (error) {
      throw error instanceof AggregateError ? (error.errors[0] as Error) : error;
    }
  };
}

/**
 * Retry `check` until it succeeds or `timeoutMs` (default 10 000 ms: engines start slowly) has passed, waiting
 * `intervalMs` (default 500 ms) between tries.
 * @throws Error `engine … is unreachable after N s: <last error>` when it never succeeded.
 */
export async function waitForEngine(check: EngineCheck, opts: { describe: string; timeoutMs?: number; intervalMs?: number }): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const started = Date.now();
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      const left = started + timeoutMs - Date.now();
      if (left <= 0) {
        const waited = Math.round((Date.now() - started) / 100) / 10;
        throw new Error(`${opts.describe} is unreachable (waited ${waited} s): ${error instanceof Error ? error.message : String(error)}`);
      }
      await Bun.sleep(Math.min(opts.intervalMs ?? 500, left));
    }
  }
}

/**
 * Watches an engine for `GET /health`: one check at `start()` (a warning on `log` when it is down; serving goes on),
 * then every `intervalMs` (default 10 000 ms), logging each change between up and down.
 */
export class EngineHealthMonitor {
  #state: EngineHealth = { ok: false, error: 'not checked yet' };
  #timer: ReturnType<typeof setInterval> | null = null;
  #checking: Promise<void> | null = null;

  constructor(private readonly opts: { check: EngineCheck; describe: string; intervalMs?: number; log?: (line: string) => void }) {}

  /** The last check's result. */
  state(): EngineHealth {
    return { ...this.#state };
  }

  /** Run the first check (logging a warning when the engine is down) and start the periodic ones. */
  async start(): Promise<EngineHealth> {
    await this.checkNow(true);
    this.#timer ??= setInterval(() => void this.checkNow(false), this.opts.intervalMs ?? 10_000);
    this.#timer.unref?.();
    return this.state();
  }

  /** Check once now (concurrent calls share one check). */
  checkNow(first = false): Promise<void> {
    this.#checking ??= this.opts.check().then(
      () => {
        if (!this.#state.ok && !first) this.opts.log?.(`${this.opts.describe} is reachable again`);
        this.#state = { ok: true, error: null };
      },
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        if (first || this.#state.ok) {
          this.opts.log?.(`WARNING: ${this.opts.describe} is not reachable: ${message}. Still serving; model calls fail until it answers (GET /health reports engine.ok).`);
        }
        this.#state = { ok: false, error: message };
      },
    ).finally(() => { this.#checking = null; });
    return this.#checking;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
