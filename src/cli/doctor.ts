/**
 * `polar doctor`: checks a box before a run and prints what to fix; exit 0 when nothing failed, 1 otherwise.
 * Checks: the engine (`--engine KIND --engine-url URL [--mode token --tokenizer DIR]`): reachable, the start-up
 * probe's token-capture report, and in token mode the tokenizer/template golden check; every harness install and
 * what runs it (native, node, or polar's own Bun); sandbox tools (bubblewrap, podman); free disk space where work
 * dirs go (`--work-root`); `--port`s free on `--host`; an admin token when `--host` is not loopback.
 */
import { statfsSync } from 'node:fs';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { createEngineClient, type EngineKind } from '../engines/index.ts';
import { HARNESS_ADAPTERS } from '../gateway/harnesses/index.ts';
import { defaultHarnessCache, harnessPaths, harnessRuntime } from '../gateway/harnesses/install.ts';
import { isLoopbackHost, parsePort, UsageError } from './common.ts';

/** One check's verdict: `fail` makes the exit code 1; `fix` says what to do. */
export interface DoctorCheck {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  fix?: string;
}

export interface DoctorOptions {
  engine?: string;
  engineUrl?: string;
  mode?: 'chat' | 'token';
  servedModel?: string;
  tokenizer?: string;
  /** Harnesses that must be installed (fail when not); the others only warn. */
  harness?: string[];
  cache?: string;
  workRoot?: string;
  /** Minimum free bytes under the work root (default 10 GiB). */
  minFreeBytes?: number;
  ports?: number[];
  host?: string;
  adminToken?: string;
  /** PATH to judge harness runtimes and sandbox tools by (default $PATH). */
  path?: string;
}

async function engineChecks(o: DoctorOptions): Promise<DoctorCheck[]> {
  if (!o.engineUrl) return [{ name: 'engine', status: 'warn', detail: 'not checked (no --engine-url)', fix: 'pass --engine KIND --engine-url URL to check the engine' }];
  const kind = (o.engine ?? 'vllm') as EngineKind;
  const messages: string[] = [];
  let engine;
  try {
    engine = createEngineClient({ kind, url: o.engineUrl, timeoutMs: 30_000, mode: o.mode ?? 'chat', servedModel: o.servedModel, tokenizerDir: o.tokenizer, goldenRate: 0, log: (m) => messages.push(m) });
    await engine.probe();
  } catch (error) {
    return [{ name: 'engine', status: 'fail', detail: `${kind} at ${o.engineUrl}: ${error instanceof Error ? error.message : String(error)}`, fix: 'start the engine, or fix --engine-url / --served-model' }];
  }
  const out: DoctorCheck[] = [{ name: 'engine', status: 'ok', detail: `${engine.id} serves ${engine.servedModel()}` }];
  const report = engine.probeReport();
  if (kind === 'openai') out.push({ name: 'token capture', status: 'warn', detail: 'engine kind openai captures no token ids: records are not trainable', fix: 'use vllm, sglang, llamacpp or sim' });
  else if (report) {
    const fields = `prompt ids ${report.captureFields.promptIds ?? 'missing'}, response ids ${report.captureFields.responseIds ?? 'missing'}, logprobs ${report.captureFields.logprobs ?? 'missing'}`;
    out.push(report.captureError
      ? { name: 'token capture', status: 'fail', detail: `${report.captureError} (${fields})`, fix: 'start vLLM with --return-tokens-as-token-ids / SGLang with a build that accepts return_token_ids, or use --mode token' }
      : { name: 'token capture', status: 'ok', detail: fields });
    if (report.streamCapture) out.push({ name: 'streamed capture', status: report.streamCapture.ok ? 'ok' : 'warn', detail: report.streamCapture.ok ? 'usable' : `not usable: ${report.streamCapture.error}`, fix: report.streamCapture.ok ? undefined : 'streaming clients will get a synthetic stream' });
  }
  if ((o.mode ?? 'chat') === 'token') {
    await (engine as { settled?: () => Promise<void> }).settled?.();
    const golden = (engine.stats?.() as { golden?: { checks: number; mismatches: number; unavailable: number; errors: number; lastMismatch: string | null } } | undefined)?.golden;
    if (!golden || golden.unavailable > 0 || golden.checks === 0) out.push({ name: 'tokenizer/template', status: 'warn', detail: `the engine could not render the golden conversation${messages.length ? `: ${messages.at(-1)}` : ''}` });
    else if (golden.mismatches > 0) out.push({ name: 'tokenizer/template', status: 'fail', detail: `our rendering differs from the engine's: ${golden.lastMismatch}`, fix: 'pass --tokenizer with the served model\'s tokenizer and chat template' });
    else out.push({ name: 'tokenizer/template', status: 'ok', detail: 'our rendering matches the engine\'s' });
  }
  return out;
}

function harnessChecks(o: DoctorOptions): DoctorCheck[] {
  const cacheDir = o.cache ?? defaultHarnessCache();
  const required = new Set((o.harness ?? []).map((n) => n.replaceAll('-', '_')));
  for (const name of required) if (!HARNESS_ADAPTERS[name]) throw new UsageError(`unknown harness ${JSON.stringify(name)}; known: ${Object.keys(HARNESS_ADAPTERS).join(', ')}`);
  const out: DoctorCheck[] = [];
  for (const [name, adapter] of Object.entries(HARNESS_ADAPTERS)) {
    if (!adapter.package) continue;
    const pkg = adapter.package;
    const id = `${pkg.name}@${pkg.version}`;
    if (!harnessPaths(cacheDir, pkg).installed) {
      out.push({ name: `harness ${name}`, status: required.has(name) ? 'fail' : 'warn', detail: `${id} not installed in ${cacheDir}`, fix: `polar harness install ${name} (or --from a pack)` });
      continue;
    }
    const rt = harnessRuntime(pkg, o.path ?? process.env.PATH ?? '');
    out.push(rt.runtime === 'node required'
      ? { name: `harness ${name}`, status: required.has(name) ? 'fail' : 'warn', detail: `${id} installed, needs node (${rt.reason})`, fix: 'install Node.js' }
      : { name: `harness ${name}`, status: 'ok', detail: `${id} installed, runs on ${rt.runtime === 'bun' ? "polar's own Bun (no node on PATH)" : rt.runtime}` });
  }
  return out;
}

function sandboxChecks(o: DoctorOptions): DoctorCheck[] {
  const PATH = o.path ?? process.env.PATH ?? '';
  const bwrap = Bun.which('bwrap', { PATH });
  const podman = Bun.which('podman', { PATH });
  return [
    bwrap ? { name: 'bubblewrap', status: 'ok', detail: bwrap } : { name: 'bubblewrap', status: 'warn', detail: 'not on PATH: local sessions run without isolation', fix: 'apt-get install bubblewrap' },
    podman ? { name: 'podman', status: 'ok', detail: podman } : { name: 'podman', status: 'warn', detail: 'not on PATH: container runtimes are unavailable', fix: 'apt-get install podman (only for tasks with a container image)' },
  ];
}

function diskCheck(o: DoctorOptions): DoctorCheck {
  let dir = resolve(o.workRoot ?? process.cwd());
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const st = statfsSync(dir);
  const free = st.bavail * st.bsize;
  const min = o.minFreeBytes ?? 10 * 2 ** 30;
  const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;
  return free >= min
    ? { name: 'disk', status: 'ok', detail: `${gib(free)} free under ${dir}` }
    : { name: 'disk', status: 'fail', detail: `${gib(free)} free under ${dir}, below ${gib(min)}`, fix: 'free space or point --work-root elsewhere' };
}

function portChecks(o: DoctorOptions): DoctorCheck[] {
  const host = o.host ?? '127.0.0.1';
  return (o.ports ?? []).map((port): DoctorCheck => {
    try {
      const server = Bun.serve({ port, hostname: host, fetch: () => new Response('') });
      void server.stop(true);
      return { name: `port ${port}`, status: 'ok', detail: `free on ${host}` };
    } catch (error) {
      return { name: `port ${port}`, status: 'fail', detail: `cannot listen on ${host}:${port}: ${error instanceof Error ? error.message : String(error)}`, fix: 'stop what holds it or choose another --port' };
    }
  });
}

function tokenCheck(o: DoctorOptions): DoctorCheck {
  const host = o.host ?? '127.0.0.1';
  if (isLoopbackHost(host)) return { name: 'admin token', status: 'ok', detail: `${host} is loopback: none needed` };
  const token = o.adminToken ?? (process.env.POLAR_ADMIN_TOKEN || undefined);
  return token
    ? { name: 'admin token', status: 'ok', detail: `set for non-loopback ${host}` }
    : { name: 'admin token', status: 'fail', detail: `${host} is not loopback and no admin token is configured`, fix: 'set --admin-token or $POLAR_ADMIN_TOKEN' };
}

/** Run every check. Throws UsageError on an unknown harness name. */
export async function runDoctor(o: DoctorOptions): Promise<DoctorCheck[]> {
  return [...(await engineChecks(o)), ...harnessChecks(o), ...sandboxChecks(o), diskCheck(o), ...portChecks(o), tokenCheck(o)];
}

export function register(program: Command): void {
  program
    .command('doctor')
    .description('check this box before a run (engine, token capture, tokenizer, harnesses, sandbox, disk, ports, token); exit 1 when something must be fixed')
    .option('--engine <kind>', 'engine kind: vllm, sglang, llamacpp, sim, openai', 'vllm')
    .option('--engine-url <url>', 'engine base URL (omit to skip the engine checks)')
    .option('--mode <mode>', 'capture mode: chat or token', 'chat')
    .option('--served-model <name>', 'model the engine serves')
    .option('--tokenizer <dir>', 'token mode: Hugging Face tokenizer directory')
    .option('--harness <name...>', 'harnesses that must be installed')
    .option('--cache <dir>', 'harness cache (default: $POLAR_HARNESS_CACHE or ~/.cache/polar/harnesses)')
    .option('--work-root <dir>', 'where session work dirs go (disk check)', '.')
    .option('--min-free-gib <n>', 'minimum free disk space under --work-root', '10')
    .option('--port <port...>', 'ports that must be free on --host')
    .option('--host <host>', 'address the gateway/proxy will listen on', '127.0.0.1')
    .option('--admin-token <token>', 'admin token (default $POLAR_ADMIN_TOKEN)')
    .option('--json', 'print the checks as JSON')
    .action(async (flags: { engine: string; engineUrl?: string; mode: string; servedModel?: string; tokenizer?: string; harness?: string[]; cache?: string; workRoot: string; minFreeGib: string; port?: string[]; host: string; adminToken?: string; json?: boolean }) => {
      if (flags.mode !== 'chat' && flags.mode !== 'token') throw new UsageError(`--mode must be chat or token, got ${JSON.stringify(flags.mode)}`);
      if (flags.mode !== 'token' && flags.tokenizer !== undefined) throw new UsageError('--tokenizer applies to --mode token only (in chat mode the engine renders the template)');
      const minFree = Number(flags.minFreeGib);
      if (!(minFree >= 0)) throw new UsageError(`--min-free-gib must be a number ≥ 0, got ${JSON.stringify(flags.minFreeGib)}`);
      const checks = await runDoctor({
        engine: flags.engine, engineUrl: flags.engineUrl, mode: flags.mode, servedModel: flags.servedModel, tokenizer: flags.tokenizer,
        harness: flags.harness, cache: flags.cache, workRoot: flags.workRoot, minFreeBytes: minFree * 2 ** 30,
        ports: (flags.port ?? []).map(parsePort), host: flags.host, adminToken: flags.adminToken,
      });
      if (flags.json) console.log(JSON.stringify(checks, null, 2));
      else for (const c of checks) console.log(`${c.status.padEnd(4)}  ${c.name}: ${c.detail}${c.fix && c.status !== 'ok' ? `\n      fix: ${c.fix}` : ''}`);
      if (checks.some((c) => c.status === 'fail')) process.exitCode = 1;
    });
}
