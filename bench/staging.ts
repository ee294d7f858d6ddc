/**
 * Staging: do the gateway node's pools keep the engine busy in an RL step where INIT costs as much as RUN?
 * (docs/architecture.md#staging-model, sizing rule in bench/README.md#staging-staging).
 *
 * A real in-process GatewayNode (local runtime, its proxy in chat mode) runs sessions against an in-process simulator
 * with the continuous-batching timing model (src/sim/timing.ts). Each session is drawn from a seeded RNG:
 * - INIT: the runtime's start plus a prepare action `sleep X`, X ~ lognormal (mean INIT_MEAN_S, σ_log 0.5);
 * - RUN: the `shell` harness replays k model calls (k uniform in 3..6) with curl, `sleep T` between calls (tool / harness
 *   time, T ~ lognormal mean THINK_MEAN_S, σ_log 0.6). The first call's prompt size and the per-turn growth come from a
 *   recorded session of a real harness CLI (test/fixtures/harness-traffic, chosen uniformly; tokens ≈ request bytes / 4,
 *   vendor text at its recorded length); each prompt extends the previous one, so the simulator's prefix cache serves
 *   the earlier turns. Answer tokens ~ lognormal (mean ANSWER_MEAN tokens, σ_log 0.6) via max_tokens on a long scripted
 *   answer: the recorded answers are the simulator's own one-liners, so they say nothing about real answer lengths;
 * - POSTRUN: trajectory build + a test_on_output evaluation `sleep E`, E ~ lognormal (mean EVAL_MEAN_S, σ_log 0.5).
 * All sessions are dispatched at once. Reported per READY buffer × INIT workers × RUN workers cell: the engine busy
 * fraction (time with ≥ 1 running sequence / wall) and mean decode batch in the steady state — from the moment the
 * RUN_WORKERS-th session starts RUNNING (ramp-up over) to the moment the last session starts RUNNING (drain begins) —
 * sessions/s over the same window, and the mean / p95 time a session spends in each stage: INIT queue (dispatch → INIT
 * start), INIT, READY wait, RUN, POSTRUN queue (RUN end → POSTRUN start).
 * Run: bun bench/staging.ts [--quick] [r4-i8-w8 ... auto-w8]   (variant = r<ready_buffer>-i<init_workers>-w<run_workers>,
 * or auto-w<run_workers> for pool_sizing auto under caps of 32); STAGING_INIT_MEAN_S=3.5 sets the INIT mean,
 * STAGING_SESSIONS=72 the sessions per cell.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SessionResult, TaskRequest } from '../src/core/records.ts';
import { createEngineClient } from '../src/engines/index.ts';
import { GatewayNode } from '../src/gateway/node.ts';
import { createProxyApp } from '../src/proxy/app.ts';
import { SimServer } from '../src/sim/server.ts';
import { openStore } from '../src/store/index.ts';
import { prng } from '../test/support/trace-helpers.ts';
import { defineBench } from './lib/bench.ts';

const READY = [0, 4, 8, 16];
const INIT = [4, 8, 16];
const RUN = [4, 8];
/** Engine: 1000 tok/s for a lone sequence (1 ms/step), +0.125 ms/step per further sequence, 50k prompt tok/s, 16 slots. */
const ENGINE = { prefillTps: 50_000, decodeTps: 1000, decodeStepPerSeqMs: 0.125, maxConcurrency: 16 };
/** Mean of the prepare sleep, s; STAGING_INIT_MEAN_S overrides it (to match RUN as measured on a loaded box). */
const INIT_MEAN_S = Number(process.env.STAGING_INIT_MEAN_S ?? 2.0);
const THINK_MEAN_S = 0.15;
const ANSWER_MEAN = 150;
const EVAL_MEAN_S = 0.3;
const POSTRUN_WORKERS = 8;
const TASK_ID = 'staging-bench';
/** 12 and 16 RUN workers: the READY buffer the rule asks for when INIT ≈ RUN (2 × R), one too small (8), and auto. */
const SHOWCASE = ['r24-i24-w12', 'r8-i8-w12', 'auto-w12', 'r32-i32-w16', 'auto-w16'];
/** Upper bound of INIT pool and READY buffer in the auto variants. */
const AUTO_CAP = 32;

// ── distributions ──────────────────────────────────────────────────────────────────────────────────────────────────

/** Lognormal with the given mean and log-space σ (Box–Muller). */
function lognormal(random: () => number, mean: number, sigma: number): number {
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return mean * Math.exp(sigma * z - (sigma * sigma) / 2);
}

interface RecordedSession {
  harness: string;
  firstPrompt: number;
  growth: number;
}

/** First-call prompt size and per-turn growth (tokens ≈ bytes / 4) of every recorded two-call harness session. */
function recordedSessions(): RecordedSession[] {
  const root = join(import.meta.dir, '../test/fixtures/harness-traffic');
  const tokens = (body: unknown) => Math.round(JSON.stringify(body).replace(/<vendor text: (\d+) chars>/g, (_, n) => 'x'.repeat(Number(n))).length / 4);
  const out: RecordedSession[] = [];
  for (const harness of readdirSync(root)) {
    for (const run of readdirSync(join(root, harness))) {
      const files = readdirSync(join(root, harness, run)).filter((f) => f.endsWith('-request.json')).sort();
      if (files.length < 2) continue;
      // The last two calls: opencode's first call is a short title request, not the agent loop.
      const [a, b] = files.slice(-2).map((f) => tokens(JSON.parse(readFileSync(join(root, harness, run, f), 'utf8')).body));
      out.push({ harness: `${harness}/${run}`, firstPrompt: a!, growth: Math.max(50, b! - a!) });
    }
  }
  if (out.length === 0) throw new Error(`no recorded sessions under ${root}`);
  return out;
}

interface SessionPlan {
  initS: number;
  calls: { promptTokens: number; answerTokens: number; thinkS: number }[];
  evalS: number;
  recorded: string;
}

function planSessions(count: number, seed: number): SessionPlan[] {
  const random = prng(seed); // seeded, so every cell replays the same sessions
  const recorded = recordedSessions();
  return Array.from({ length: count }, () => {
    const rec = recorded[Math.floor(random() * recorded.length)]!;
    const k = 3 + Math.floor(random() * 4);
    const calls = Array.from({ length: k }, (_, j) => ({
      promptTokens: rec.firstPrompt + j * rec.growth,
      answerTokens: Math.max(8, Math.round(lognormal(random, ANSWER_MEAN, 0.6))),
      thinkS: lognormal(random, THINK_MEAN_S, 0.6),
    }));
    return { initS: lognormal(random, INIT_MEAN_S, 0.5), calls, evalS: lognormal(random, EVAL_MEAN_S, 0.5), recorded: rec.harness };
  });
}

/** The session's calls as one shell command: a prompt of ~N tokens (" w" per token), curl, then the think time. */
function harnessCommand(plan: SessionPlan): string {
  return plan.calls
    .map((c, i) => {
      const body =
        `{ printf '{"model":"qwen","max_tokens":${c.answerTokens},"messages":[{"role":"user","content":"'; ` +
        `yes w | head -n ${c.promptTokens} | tr '\\n' ' '; printf '"}]}'; }`;
      const post = `${body} | curl -sf -m 120 "$OPENAI_BASE_URL/chat/completions" -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' --data-binary @- >/dev/null`;
      return i < plan.calls.length - 1 ? `${post} && sleep ${c.thinkS.toFixed(3)}` : post;
    })
    .join(' && ');
}

// ── statistics ─────────────────────────────────────────────────────────────────────────────────────────────────────

const mean = (xs: number[]) => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length);
function p95(xs: number[]): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(0.95 * sorted.length) - 1)]!;
}
const ms = (xs: number[]) => `${Math.round(mean(xs))} / ${Math.round(p95(xs))}`;

await defineBench({
  name: 'staging',
  variants: () => [...READY.flatMap((r) => INIT.flatMap((i) => RUN.map((w) => `r${r}-i${i}-w${w}`))), ...RUN.map((w) => `auto-w${w}`), ...SHOWCASE],
  async run(variant, ctx) {
    // auto-w<N>: pool_sizing auto with AUTO_CAP as the configured (maximum) INIT pool and READY buffer.
    const auto = /^auto-w(\d+)$/.exec(variant);
    const [, ready, init, runWorkers] = auto
      ? [0, AUTO_CAP, AUTO_CAP, Number(auto[1])]
      : (/^r(\d+)-i(\d+)-w(\d+)$/.exec(variant)!.map(Number) as [number, number, number, number]);
    const count = Number(process.env.STAGING_SESSIONS ?? (ctx.quick ? 24 : 48));
    const plans = planSessions(count, 20_251_201);
    const work = mkdtempSync(join(tmpdir(), 'polar-bench-staging-'));
    const sim = await SimServer.start(ENGINE);
    // One long scripted answer; max_tokens cuts it to each call's drawn answer length.
    sim.registerScript(TASK_ID, { variants: { answer: { steps: [{ say: Array.from({ length: 2000 }, (_, i) => `word${i % 97}`).join(' ') }] } } });
    const store = openStore(':memory:');
    const engine = createEngineClient({ kind: 'sim', url: sim.url, mode: 'chat', timeoutMs: 120_000 });
    await engine.probe();
    const node = new GatewayNode({
      nodeId: 'bench',
      capacity: { init_workers: init, ready_buffer: ready, max_run_workers: runWorkers, postrun_workers: POSTRUN_WORKERS },
      poolSizing: auto ? 'auto' : 'fixed',
      store,
      workRoot: work,
      autoInstallHarness: false,
      harnessLogDir: null,
      proxy: (sessions) => createProxyApp({ engine, store, sessions }),
      log: () => {},
    });
    try {
      await node.start();
      const at = new Map<string, Partial<Record<string, number>>>();
      const runStarts: number[] = [];
      let windowStart: ReturnType<SimServer['metrics']> | null = null;
      let windowEnd: ReturnType<SimServer['metrics']> | null = null;
      node.onEvent((e) => {
        const t = at.get(e.session_id) ?? {};
        t[e.status] ??= performance.now();
        at.set(e.session_id, t);
        if (e.status === 'RUNNING') {
          runStarts.push(performance.now());
          if (runStarts.length === Math.min(runWorkers, count)) windowStart = sim.metrics();
          if (runStarts.length === count) windowEnd = sim.metrics();
        }
      });
      const finishedAt = new Map<string, number>();
      node.onResult((r) => finishedAt.set(r.session_id, performance.now()));
      const ids = plans.map((_, i) => `staging-${variant}-${i}-${crypto.randomUUID()}`);
      const dispatchedAt = new Map<string, number>();
      const t0 = performance.now();
      for (const [i, id] of ids.entries()) {
        const plan = plans[i]!;
        const task = {
          task_id: TASK_ID,
          instruction: 'replay recorded model calls',
          num_samples: count,
          timeout_seconds: 600,
          agent: { harness: 'shell', command: harnessCommand(plan), model_name: 'qwen' },
          builder: { strategy: 'per_request' },
          runtime: { kind: 'local', prepare: [{ exec: { command: `sleep ${plan.initS.toFixed(3)}` } }] },
          evaluator: { strategy: 'test_on_output', config: { command: `sleep ${plan.evalS.toFixed(3)}`, expect_exit_code: 0 } },
        } as TaskRequest;
        dispatchedAt.set(id, performance.now());
        node.dispatch({ session_id: id, task, sample_index: i });
      }
      const results: SessionResult[] = await Promise.all(ids.map((id) => node.wait(id)));
      const wallMs = performance.now() - t0;
      const failed = results.filter((r) => r.status !== 'COMPLETED');
      if (failed.length > 0) throw new Error(`${failed.length} sessions did not complete: ${failed[0]!.status} ${failed[0]!.error ?? ''}`);
      const a = windowStart as ReturnType<SimServer['metrics']> | null;
      const b = windowEnd as ReturnType<SimServer['metrics']> | null;
      if (!a || !b) throw new Error('steady-state window not observed');
      const windowMs = b.wallMs - a.wallMs;
      const busy = (b.busyMs - a.busyMs) / windowMs;
      const batch = (b.runningSeqMs - a.runningSeqMs) / windowMs;
      // Sessions finished per second in the window: completions between its two instants.
      const wStart = runStarts[Math.min(runWorkers, count) - 1]!;
      const wEnd = runStarts[count - 1]!;
      const doneInWindow = [...finishedAt.values()].filter((t) => t >= wStart && t <= wEnd).length;
      const stage = (id: string) => at.get(id)!;
      const initQueue = ids.map((id) => stage(id).INITIALIZING! - dispatchedAt.get(id)!);
      const postrunQueue = results.map((r) => finishedAt.get(r.session_id)! - stage(r.session_id).POST_RUN! - r.timing.postrun_ms);
      const runMs = results.map((r) => r.timing.run_ms);
      const initMs = results.map((r) => r.timing.init_ms);
      return {
        title: `staging · steady-state engine busy by READY buffer × INIT workers × RUN workers (INIT ≈ RUN)`,
        columns: ['ready_buffer', 'init_workers', 'max_run_workers', 'sessions', 'engine busy', 'mean batch', 'sessions/s', 'window s', 'INIT queue ms', 'INIT ms', 'READY wait ms', 'RUN ms', 'POSTRUN queue ms', 'wall s'],
        rows: [[
          auto ? `auto → ${node.poolSizes().ready_buffer}` : ready, auto ? `auto → ${node.poolSizes().init_workers}` : init, runWorkers, count, busy, batch, doneInWindow / (windowMs / 1000), windowMs / 1000,
          ms(initQueue), ms(initMs), ms(results.map((r) => r.timing.ready_queue_ms)), ms(runMs), ms(postrunQueue.map((x) => Math.max(0, x))), wallMs / 1000,
        ]],
        keyColumns: 3,
        notes: [
          `${count} sessions dispatched at once (seeded, the same in every cell); INIT = local runtime + prepare \`sleep\` lognormal mean ${INIT_MEAN_S} s; RUN = 3–6 recorded-size calls, think lognormal mean ${THINK_MEAN_S} s, answers lognormal mean ${ANSWER_MEAN} tokens; POSTRUN evaluation lognormal mean ${EVAL_MEAN_S} s, ${POSTRUN_WORKERS} workers.`,
          `engine: prefill ${ENGINE.prefillTps} tok/s, decode step 1000/${ENGINE.decodeTps} + ${ENGINE.decodeStepPerSeqMs} × (batch − 1) ms, ${ENGINE.maxConcurrency} slots.`,
          'engine busy = simulator time with ≥ 1 running sequence / wall, mean batch = mean running sequences, sessions/s = sessions finished per second — all over the steady-state window (the max_run_workers-th RUNNING start → the last RUNNING start); stage times mean / p95 ms over all sessions.',
        ],
      };
    } finally {
      await node.stop();
      await sim.stop();
      store.close();
      rmSync(work, { recursive: true, force: true });
    }
  },
});
