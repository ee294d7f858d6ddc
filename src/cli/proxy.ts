/**
 * `polar proxy --port P --engine KIND --engine-url URL[,URL…] [--mode chat|token] [--db FILE] [--host H] [--served-model NAME]
 * [--tokenizer DIR] [--family NAME] [--allow-golden-mismatch] [--golden-rate R] [--max-body-bytes N] [--engine-stream auto|always|never]
 * [--restore-reasoning]`: the
 * proxy alone, for capturing any harness run by hand (docs/architecture.md#processes). Every API key opens an ad-hoc
 * session (no key → one session with a random `anon-…` id, printed at start); records go to the SQLite store in --db
 * and are listed by `GET /sessions/{id}/completions`, which needs that session's own API key or the admin token.
 * `--mode token` renders and tokenises in the
 * proxy (engines sim, vllm, sglang, llamacpp); its buffer and golden-check counters are on `GET /`.
 * `--admin-token T` (or $POLAR_ADMIN_TOKEN): `/admin/*` (pause, resume, policy_version) need `Authorization: Bearer T`;
 * without a token, `/admin/*` answers loopback callers only (src/proxy/admin-access.ts), and a non-loopback `--host`
 * is refused (exit 2) unless `--insecure-no-token`.
 * Runs until SIGINT/SIGTERM.
 */
import { GatewayError } from '../core/errors.ts';
import { placementLogLine } from '../engines/system-placement.ts';
import { EngineHealthMonitor, engineReplicasLivenessCheck } from '../engines/health.ts';
import { collectEngineUrls, engineUrlFields } from './engine-urls.ts';
import { Option, type Command } from 'commander';
import { createEngineClient, ENGINE_KINDS, type EngineConfig } from '../engines/index.ts';
import type { EngineKind, EngineStreamSetting } from '../engines/types.ts';
import { createProxyApp } from '../proxy/app.ts';
import { adHocSessions } from '../proxy/sessions.ts';
import { DEFAULT_MAX_BODY_BYTES } from '../proxy/types.ts';
import { openStore } from '../store/index.ts';
import { parsePort, parsePositiveInt, UsageError } from './common.ts';
import { isLoopbackHost } from './common.ts';
import type { SystemMessagePlacement } from '../engines/chat-request.ts';
import { MODEL_FAMILY_NAMES } from '../tokenization/families.ts';

interface ProxyFlags {
  port: number;
  host: string;
  engine: string;
  engineUrl: string[];
  engineApiKey?: string;
  mode: string;
  allowGoldenMismatch?: boolean;
  db: string;
  servedModel?: string;
  systemMessages: SystemMessagePlacement | 'auto';
  timeoutMs: number;
  keepaliveMs: number;
  maxBodyBytes: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  maxTokens?: number;
  policyVersion?: string;
  task?: string;
  abortOnDisconnect?: boolean;
  keepBillingHeader?: boolean;
  restoreReasoning?: boolean;
  insecureNoToken?: boolean;
  tokenizer?: string;
  family?: string;
  goldenRate?: number;
  adminToken?: string;
  engineStream: EngineStreamSetting;
}

function parseNumber(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`${flag} must be a number, got ${JSON.stringify(value)}`);
    return n;
  };
}

function parseInteger(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n)) throw new UsageError(`${flag} must be an integer, got ${JSON.stringify(value)}`);
    return n;
  };
}

export function register(program: Command): void {
  program
    .command('proxy')
    .description('run the capturing proxy alone in front of an inference engine (ad-hoc session per API key)')
    .requiredOption('--port <port>', 'port to listen on (0 = any free port)', parsePort)
    .requiredOption('--engine <kind>', `engine kind: ${ENGINE_KINDS.join(', ')}`)
    .requiredOption('--engine-url <url>', 'engine base URL without /v1, e.g. http://127.0.0.1:8000; repeat it or separate URLs with commas for replicas of one engine (session affinity, least outstanding requests, health checks)', collectEngineUrls)
    .option('--mode <mode>', 'capture mode: chat (the engine renders the template) or token (the proxy renders and sends token ids)', 'chat')
    .option('--tokenizer <dir>', 'token mode: Hugging Face directory of the served model (tokenizer.json + chat template); default: embedded Qwen3')
    .addOption(new Option('--family <name>', 'token mode: model family; default: detected from the chat template').choices(MODEL_FAMILY_NAMES as string[]))
    .option('--allow-golden-mismatch', 'token mode: start even when our chat template rendering differs from the engine\'s (default: refuse, exit 1)')
    .option('--golden-rate <r>', 'token mode: fraction of turns whose rendering is compared with the engine\'s own, 0..1', parseNumber('--golden-rate'), 0.02)
    .option('--db <file>', 'SQLite store for the completion records', 'polar.db')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--served-model <name>', 'model name to send to the engine (default: the first model it lists)')
    .addOption(new Option('--system-messages <placement>', "auto (detect whether the engine's chat template renders a system message after a user turn), merge later system messages into the leading one, or keep them in place (templates that allow it, e.g. Qwen3)").choices(['auto', 'merge', 'in-place']).default('auto'))
    .option('--engine-api-key <key>', 'bearer token for the engine (default: $POLAR_ENGINE_API_KEY)')
    .option('--timeout-ms <ms>', 'engine call timeout in ms', parsePositiveInt('--timeout-ms'), 600_000)
    .option('--keepalive-ms <ms>', 'keep-alive interval of synthetic streams in ms', parsePositiveInt('--keepalive-ms'), 5000)
    .option('--max-body-bytes <n>', 'largest request body accepted in bytes; larger ones get 413 in the caller\'s error shape', parsePositiveInt('--max-body-bytes'), DEFAULT_MAX_BODY_BYTES)
    .option('--temperature <t>', 'default temperature when the client sends none', parseNumber('--temperature'))
    .option('--top-p <p>', 'default top_p', parseNumber('--top-p'))
    .option('--top-k <k>', 'default top_k (-1 = off)', parseInteger('--top-k'))
    .option('--min-p <p>', 'default min_p', parseNumber('--min-p'))
    .option('--max-tokens <n>', 'default output cap in tokens', parsePositiveInt('--max-tokens'))
    .option('--policy-version <v>', 'policy version stamped on records until POST /admin/policy_version')
    .option('--task <id>', 'task id of every session, sent to the engine as x-polar-task (polar sim plays the behaviour script <id>.yaml of its --scripts)')
    .option('--abort-on-disconnect', 'abort the engine call when the client disconnects (default: finish and record it)')
    .option('--admin-token <token>', 'bearer token required by /admin/* and GET /sessions/{id}/completions (default: $POLAR_ADMIN_TOKEN; none: admin from loopback callers only)')
    .option('--insecure-no-token', 'allow a non-loopback --host without an admin token (prints a warning)')
    .addOption(new Option('--engine-stream <setting>', 'streaming clients get a streamed engine call: auto (when the start-up probe finds its capture sound), always, never (synthetic replay)').choices(['auto', 'always', 'never']).default('auto'))
    .option('--keep-billing-header', "keep Claude Code's x-anthropic-billing-header system line (default: strip it)")
    .option('--restore-reasoning', "chat mode: restore reasoning a harness dropped from its history (from the session's own answers) before the engine renders it")
    .action(async (flags: ProxyFlags) => {
      if (flags.mode !== 'chat' && flags.mode !== 'token') throw new UsageError(`--mode must be chat or token, got ${JSON.stringify(flags.mode)}`);
      if (!(ENGINE_KINDS as readonly string[]).includes(flags.engine)) {
        throw new UsageError(`--engine must be one of ${ENGINE_KINDS.join(', ')}, got ${JSON.stringify(flags.engine)}`);
      }
      if (flags.engine === 'llamacpp' && flags.mode !== 'token') throw new UsageError('--engine llamacpp has no chat-mode capture; use --mode token');
      if (flags.engine === 'openai' && flags.mode === 'token') throw new UsageError('--engine openai has no token endpoint; use --mode chat');
      if (flags.mode !== 'token' && (flags.tokenizer !== undefined || flags.family !== undefined)) throw new UsageError('--tokenizer and --family apply to --mode token only');
      if (flags.mode === 'token' && flags.restoreReasoning === true) throw new UsageError('--restore-reasoning applies to --mode chat only (in token mode the proxy renders the sampled tokens itself)');
      if (flags.goldenRate !== undefined && !(flags.goldenRate >= 0 && flags.goldenRate <= 1)) throw new UsageError(`--golden-rate must be in [0, 1], got ${flags.goldenRate}`);
      const adminToken = flags.adminToken ?? (process.env.POLAR_ADMIN_TOKEN || undefined);
      if (adminToken !== undefined && adminToken.trim() === '') throw new UsageError('--admin-token must not be empty');
      if (!isLoopbackHost(flags.host) && !adminToken) {
        if (!flags.insecureNoToken) {
          throw new UsageError(
            `polar proxy: refusing to listen on a non-loopback address (--host ${flags.host}) without an admin token: anyone who ` +
            'can reach it could pause inference and change the policy version. Fix: pass --admin-token (or export ' +
            'POLAR_ADMIN_TOKEN), or listen on 127.0.0.1; to run unprotected anyway on a trusted, isolated network pass --insecure-no-token.',
          );
        }
        console.error(`WARNING polar proxy: listening on ${flags.host} WITHOUT an admin token (--insecure-no-token): /admin/* answers loopback callers only, but anyone who can reach the port can use the engine through it.`);
      }
      const defaults: EngineConfig['defaults'] = {};
      if (flags.temperature !== undefined) defaults.temperature = flags.temperature;
      if (flags.topP !== undefined) defaults.topP = flags.topP;
      if (flags.topK !== undefined) defaults.topK = flags.topK;
      if (flags.minP !== undefined) defaults.minP = flags.minP;
      if (flags.maxTokens !== undefined) defaults.maxTokens = flags.maxTokens;
      let engine;
      try {
        engine = createEngineClient({
          kind: flags.engine as EngineKind,
          ...engineUrlFields(flags.engineUrl),
          apiKey: flags.engineApiKey ?? process.env.POLAR_ENGINE_API_KEY,
          servedModel: flags.servedModel,
          mode: flags.mode,
          timeoutMs: flags.timeoutMs,
          defaults,
          tokenizerDir: flags.tokenizer,
          family: flags.family,
          allowGoldenMismatch: flags.allowGoldenMismatch === true,
          goldenRate: flags.goldenRate,
          systemMessages: flags.systemMessages,
          stream: flags.engineStream,
        });
      } catch (error) {
        throw new UsageError(error instanceof Error ? error.message : String(error));
      }
      // An engine that is down does not stop the proxy (engines start slowly): it serves, GET /health reports
      // engine.ok false, and calls fail with the engine's error until it answers. An engine that answers but rejects
      // the probe (unknown model, broken capture) is a failure of the work: exit 1 with the reason.
      const log = (line: string) => console.error(`polar proxy: ${line}`);
      const engineHealth = new EngineHealthMonitor({
        check: engineReplicasLivenessCheck({ kind: flags.engine, ...engineUrlFields(flags.engineUrl), apiKey: flags.engineApiKey ?? process.env.POLAR_ENGINE_API_KEY }),
        describe: `engine ${flags.engine} at ${flags.engineUrl.join(', ')}`, log,
      });
      try {
        await engine.probe();
      } catch (error) {
        // Only an engine that does not answer is waited for; local problems (a bad tokenizer directory) and an
        // engine that answers but refuses stay failures of the work.
        if (!(error instanceof GatewayError && error.kind === 'upstream' && / unreachable at /.test(error.message))) throw error;
      }
      await engineHealth.start();
      const report = engine.probeReport();
      const placement = placementLogLine(report);
      if (placement) console.log(`polar proxy: ${placement}`);
      if (report?.captureError) console.error(`polar proxy: warning: the engine's token capture looks broken: ${report.captureError}`);
      if (report?.streamCapture && !report.streamCapture.ok) console.error(`polar proxy: streaming clients get a synthetic stream: the engine's streamed capture is not usable (${report.streamCapture.error})`);
      if (engine.kind === 'openai') console.error('polar proxy: warning: engine kind "openai" captures no token ids; records are not trainable');
      const store = openStore(flags.db, { checkpoint: 'background' });
      const sessions = adHocSessions(flags.task !== undefined ? { taskId: flags.task } : {});
      const app = createProxyApp({
        engine,
        store,
        sessions,
        options: {
          keepaliveIntervalMs: flags.keepaliveMs,
          maxBodyBytes: flags.maxBodyBytes,
          abortOnClientDisconnect: flags.abortOnDisconnect === true,
          initialPolicyVersion: flags.policyVersion ?? null,
          dialectOptions: { stripBillingHeader: flags.keepBillingHeader !== true },
          ...(flags.restoreReasoning === true ? { restoreReasoning: true } : {}),
          adminToken: adminToken ?? null,
        },
      });
      // idleTimeout 0: a synthetic stream may wait minutes on the engine between keep-alives. Bun's own body limit is
      // lifted so the app's limit (--max-body-bytes) always answers, in the caller's error shape, not Bun's empty 413.
      const server = Bun.serve({
        port: flags.port, hostname: flags.host, fetch: app.fetch, idleTimeout: 0, maxRequestBodySize: Number.MAX_SAFE_INTEGER,
        routes: { '/health': { GET: () => Response.json({ ok: true, engine: engineHealth.state(), engine_busy_fraction: app.metrics.busyFraction(), inference_paused: app.gate.isPaused, paused_since: app.gate.pausedSince }) } },
      });
      let model: string;
      try {
        model = engine.servedModel();
      } catch {
        model = 'not probed yet';
      }
      console.log(`polar proxy listening on http://${flags.host}:${server.port} → ${engine.id} (model ${model}), records in ${flags.db}`);
      console.log(`polar proxy: admin endpoints ${adminToken ? 'require the admin token' : 'answer loopback callers only (no --admin-token)'}; requests without an API key go to session ${sessions.defaultSession}; GET /health, GET /metrics`);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      engineHealth.stop();
      await server.stop();
      store.close();
    });
}
