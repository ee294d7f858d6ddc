/**
 * Test helpers for the end-to-end tests that run real harness CLIs against the proxy: a work tree for the harness,
 * running a CLI with a hard deadline, a fake engine that scripts a two-turn shell-tool loop, the checks on the two
 * captured turns, and the simulator + proxy pair the pi tests use.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import type { SessionDirectory } from '../../src/proxy/types.ts';
import { SimServer, type SimServerOptions } from '../../src/sim/server.ts';
import { startFakeEngine, type FakeEngine, type FakeReply } from './fake-engine.ts';
import { startTestProxy, type TestProxy } from './proxy-harness.ts';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The files of the work tree the harness is asked to `ls`. */
export const LS_WORK_FILES: Readonly<Record<string, string>> = { 'README.txt': 'hello\n', 'main.py': 'print("hi")\n' };

/** Creates `root/home` and `root/work` and writes `files` (name → content) into the work tree. */
export function makeWorkspace(root: string, files: Readonly<Record<string, string>>): { home: string; work: string } {
  const home = join(root, 'home');
  const work = join(root, 'work');
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  for (const [name, content] of Object.entries(files)) writeFileSync(join(work, name), content);
  return { home, work };
}

/**
 * Runs a CLI with only PATH inherited from this process plus `env`, stdin closed; SIGKILL after `timeoutMs` (ms) so a
 * hung harness fails its test instead of the suite.
 */
export async function runCli(cmd: string[], env: Record<string, string>, cwd: string, timeoutMs = 150_000): Promise<CliResult> {
  const proc = Bun.spawn(cmd, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/**
 * A fake-engine script for a two-turn tool loop. Turn 1: call the harness's shell tool (the first of `shellTools`, a
 * map of tool name → name of its command argument, that the request offers) with `ls`; once a tool result is in the
 * conversation, or when no shell tool is offered: the text `final`.
 */
export function twoTurnShellScript(shellTools: Readonly<Record<string, string>>, final: string): (body: Record<string, unknown>) => FakeReply {
  return (body) => {
    const messages = body.messages as Array<{ role: string }>;
    const tools = ((body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
    const shell = Object.keys(shellTools).find((name) => tools.includes(name));
    if (messages.some((m) => m.role === 'tool') || !shell) return { kind: 'text', text: final };
    return { kind: 'tool-calls', calls: [{ name: shell, arguments: { [shellTools[shell]!]: 'ls' } }] };
  };
}

/**
 * Checks the records of a session that answered with a call of `shell`, then with the text `final` after the tool
 * result (the real output of `ls` in the work tree): both captured with tokens and logprobs. Returns the two turns.
 */
export function expectTwoTurnLoop(records: CompletionRecord[], shell: string, final: string): { toolTurn: CompletionRecord; finalTurn: CompletionRecord } {
  const toolTurn = records.find((r) => r.ir_response?.toolCalls.some((c) => c.name === shell));
  const finalTurn = records.find((r) => r.ir_request.messages.some((m) => m.role === 'tool') && r.ir_response?.content.some((p) => p.type === 'text' && p.text === final));
  expect(toolTurn).toBeDefined();
  expect(finalTurn).toBeDefined();
  expect(finalTurn!.seq).toBeGreaterThan(toolTurn!.seq);
  for (const rec of [toolTurn!, finalTurn!]) {
    expect(rec.capture_error).toBeNull();
    expect(rec.response_ids.length).toBe(rec.logprobs.length);
    expect(rec.prompt_ids.length).toBeGreaterThan(0);
  }
  const toolMessage = finalTurn!.ir_request.messages.find((m) => m.role === 'tool')!;
  expect(JSON.stringify(toolMessage)).toContain('README.txt');
  return { toolTurn: toolTurn!, finalTurn: finalTurn! };
}

/**
 * For the calling test file: when `isolated`, a fake vLLM engine (served model `qwen3-e2e`, `script`) and a proxy in
 * front of it, started in beforeAll; `workspace()` makes a fresh temporary work tree with LS_WORK_FILES. All stopped
 * and removed in afterAll.
 */
export function useFakeEngineProxy(opts: { isolated: boolean; script: (body: Record<string, unknown>) => FakeReply; tmpPrefix: string }): {
  readonly engine: FakeEngine;
  readonly proxy: TestProxy;
  workspace(): { home: string; work: string };
} {
  let engine: FakeEngine | undefined;
  let proxy: TestProxy | undefined;
  const dirs: string[] = [];
  beforeAll(async () => {
    if (!opts.isolated) return;
    engine = await startFakeEngine({ shape: 'vllm', servedModel: 'qwen3-e2e', script: opts.script });
    proxy = await startTestProxy({ engineUrl: engine.url, kind: 'vllm', options: { keepaliveIntervalMs: 1000 } });
  });
  afterAll(async () => {
    await proxy?.stop();
    await engine?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    get engine() {
      return engine!;
    },
    get proxy() {
      return proxy!;
    },
    workspace() {
      const root = mkdtempSync(join(tmpdir(), opts.tmpPrefix));
      dirs.push(root);
      return makeWorkspace(root, LS_WORK_FILES);
    },
  };
}

/**
 * For the calling test file: when `isolated`, a temporary root directory, the simulator (instant timing, `scripts`)
 * and a proxy in front of it (engine kind `sim`, `sessions`), started in beforeAll and stopped/removed in afterAll.
 */
export function useSimProxy(opts: { isolated: boolean; tmpPrefix: string; scripts: SimServerOptions['scripts']; sessions: SessionDirectory }): {
  readonly sim: SimServer;
  readonly proxy: TestProxy;
  readonly root: string;
} {
  let sim: SimServer | undefined;
  let proxy: TestProxy | undefined;
  let root: string | undefined;
  beforeAll(async () => {
    if (!opts.isolated) return;
    root = mkdtempSync(join(tmpdir(), opts.tmpPrefix));
    sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: opts.scripts });
    proxy = await startTestProxy({ engineUrl: sim.url, kind: 'sim', timeoutMs: 30_000, sessions: opts.sessions, options: { keepaliveIntervalMs: 1000 } });
  });
  afterAll(async () => {
    await proxy?.stop();
    await sim?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });
  return {
    get sim() {
      return sim!;
    },
    get proxy() {
      return proxy!;
    },
    get root() {
      return root!;
    },
  };
}

/**
 * Runs `pi -p` (print mode, no session file) with provider `polar` and model `qwen3-sim` from `agentDir/models.json`;
 * `apiKey` is the session key the proxy resolves. Offline, no version check, no telemetry.
 */
export function runPiPrint(opts: { bin: string; prompt: string; work: string; home: string; agentDir: string; apiKey: string }): Promise<CliResult> {
  return runCli(
    [opts.bin, '-p', '--provider', 'polar', '--model', 'qwen3-sim', '--no-session', opts.prompt],
    { HOME: opts.home, PI_CODING_AGENT_DIR: opts.agentDir, POLAR_API_KEY: opts.apiKey, PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0' },
    opts.work,
  );
}
