/** The simulator's engine step loop (src/sim/timing.ts) on virtual time: no assertion depends on machine speed. */
import { describe, expect, test } from 'bun:test';
import { TimingModel, type TimingOptions } from '../../src/sim/timing.ts';
import { ManualScheduler } from '../support/manual-scheduler.ts';

function engine(options: Partial<TimingOptions>) {
  const clock = new ManualScheduler();
  const model = new TimingModel({ prefillTps: 0, decodeTps: 1000, maxConcurrency: 64, ...options, scheduler: clock });
  /** Admit, prefill, decode; record the virtual time each phase ends. */
  const call = (name: string, promptTokens: number, tokens: number, log: Record<string, number>) =>
    (async () => {
      const seq = await model.acquire();
      log[`${name}:admitted`] = clock.now();
      await seq.prefill(promptTokens);
      log[`${name}:prefilled`] = clock.now();
      seq.decode(tokens);
      await seq.done;
      log[`${name}:done`] = clock.now();
    })();
  return { clock, model, call };
}

describe('timing model (continuous batching)', () => {
  test('a lone sequence decodes at decode_tps: 100 tokens at 1000 tok/s take 100 ms', async () => {
    const { clock, call } = engine({});
    const log: Record<string, number> = {};
    const done = call('a', 0, 100, log);
    await clock.advance(99);
    expect(log['a:done']).toBeUndefined();
    await clock.advance(1);
    await done;
    expect(log['a:done']).toBeCloseTo(100, 6);
  });

  test('decode_step_per_seq_ms: a step grows with the batch, so each sequence slows but aggregate throughput rises', async () => {
    // Without the per-sequence cost 4 sequences of 100 tokens finish together at 100 ms (every one at 1000 tok/s).
    const flat = engine({});
    const flatLog: Record<string, number> = {};
    const flatAll = Promise.all(['a', 'b', 'c', 'd'].map((n) => flat.call(n, 0, 100, flatLog)));
    await flat.clock.advance(1000);
    await flatAll;
    for (const n of ['a', 'b', 'c', 'd']) expect(flatLog[`${n}:done`]).toBeCloseTo(100, 6);

    // With 0.5 ms per further sequence a step of 4 takes 1 + 0.5 × 3 = 2.5 ms: 250 ms for 100 steps, 400 tokens in
    // 250 ms = 1600 tok/s aggregate against 1000 tok/s alone.
    const batched = engine({ decodeStepPerSeqMs: 0.5 });
    expect(batched.model.stepMs(1)).toBe(1);
    expect(batched.model.stepMs(4)).toBe(2.5);
    const log: Record<string, number> = {};
    const all = Promise.all(['a', 'b', 'c', 'd'].map((n) => batched.call(n, 0, 100, log)));
    await batched.clock.advance(1000);
    await all;
    for (const n of ['a', 'b', 'c', 'd']) expect(log[`${n}:done`]).toBeCloseTo(250, 6);
  });

  test('the batch shrinks when a sequence ends: the survivor speeds up (continuous batching, no waiting for the batch)', async () => {
    const { clock, call } = engine({ decodeStepPerSeqMs: 1 });
    const log: Record<string, number> = {};
    // Two decoding: 2 ms per step. a (50 tokens) ends at 100 ms; b has 50 of 150 left, then 1 ms per step → 200 ms.
    const all = Promise.all([call('a', 0, 50, log), call('b', 0, 150, log)]);
    await clock.advance(1000);
    await all;
    expect(log['a:done']).toBeCloseTo(100, 6);
    expect(log['b:done']).toBeCloseTo(200, 6);
  });

  test('max_concurrency queues the rest FIFO; a queued request is admitted when a sequence ends', async () => {
    const { clock, model, call } = engine({ maxConcurrency: 2 });
    const log: Record<string, number> = {};
    const all = Promise.all([call('a', 0, 10, log), call('b', 0, 30, log), call('c', 0, 10, log)]);
    await clock.advance(1);
    expect(model.snapshot().running).toBe(2);
    expect(model.snapshot().queued).toBe(1);
    await clock.advance(1000);
    await all;
    expect(log['c:admitted']).toBeCloseTo(10, 6);
    expect(log['c:done']).toBeCloseTo(20, 6);
    expect(log['b:done']).toBeCloseTo(30, 6);
    expect(model.snapshot().queued).toBe(0);
  });

  test('prefill_tps is one FIFO lane for the engine: two 1000-token prompts at 10000 tok/s end at 100 and 200 ms', async () => {
    const { clock, call } = engine({ prefillTps: 10_000 });
    const log: Record<string, number> = {};
    const all = Promise.all([call('a', 1000, 10, log), call('b', 1000, 10, log)]);
    await clock.advance(1000);
    await all;
    expect(log['a:prefilled']).toBeCloseTo(100, 6);
    expect(log['b:prefilled']).toBeCloseTo(200, 6);
    expect(log['a:done']).toBeCloseTo(110, 6);
  });

  test('busy fraction counts time with ≥ 1 running sequence; runningSeqMs integrates the batch', async () => {
    const { clock, model, call } = engine({});
    const log: Record<string, number> = {};
    const all = Promise.all([call('a', 0, 100, log), call('b', 0, 50, log)]);
    await clock.advance(200);
    await all;
    const s = model.snapshot();
    expect(s.wallMs).toBe(200);
    expect(s.busyMs).toBeCloseTo(100, 6);
    expect(s.busyFraction).toBeCloseTo(0.5, 6);
    // Two sequences for 50 ms, one for 50 ms.
    expect(s.runningSeqMs).toBeCloseTo(150, 6);
  });

  test('until(k) resolves when k tokens are decoded (streams follow the engine)', async () => {
    const { clock, model } = engine({});
    const seq = await model.acquire();
    seq.decode(100);
    let at = -1;
    void seq.until(40).then(() => (at = clock.now()));
    await clock.advance(39);
    expect(at).toBe(-1);
    await clock.advance(1);
    expect(at).toBeCloseTo(40, 6);
    expect(seq.decoded).toBe(40);
  });

  test('release() (a cancelled request) frees the slot for the next request', async () => {
    const { clock, model, call } = engine({ maxConcurrency: 1 });
    const first = await model.acquire();
    first.decode(1000);
    const log: Record<string, number> = {};
    const second = call('b', 0, 10, log);
    await clock.advance(5);
    expect(log['b:admitted']).toBeUndefined();
    first.release();
    await clock.advance(100);
    await second;
    expect(log['b:admitted']).toBe(5);
    expect(log['b:done']).toBeCloseTo(15, 6);
  });

  test('an aborted request frees its slot', async () => {
    const { clock, model } = engine({ maxConcurrency: 1 });
    const abort = new AbortController();
    const seq = await model.acquire(abort.signal);
    seq.decode(1000);
    abort.abort();
    await clock.advance(1);
    expect(model.snapshot().running).toBe(0);
  });

  test('pause holds new requests; running ones finish', async () => {
    const { clock, model, call } = engine({});
    const log: Record<string, number> = {};
    const a = call('a', 0, 10, log);
    await clock.advance(1);
    model.pause();
    const b = call('b', 0, 10, log);
    await clock.advance(50);
    expect(log['a:done']).toBeCloseTo(10, 6);
    expect(log['b:admitted']).toBeUndefined();
    model.resume();
    await clock.advance(50);
    await Promise.all([a, b]);
    expect(log['b:admitted']).toBe(51);
  });

  test('far into the clock with sub-microsecond steps every sequence still ends (no rounding stall)', async () => {
    const clock = new ManualScheduler(123_456_789.123);
    const model = new TimingModel({ prefillTps: 3e9, decodeTps: 3e6, maxConcurrency: 8, decodeStepPerSeqMs: 1e-7, scheduler: clock });
    const done: number[] = [];
    const all = Promise.all([1, 7, 333, 1001].map(async (n) => {
      const seq = await model.acquire();
      await seq.prefill(n * 3);
      seq.decode(n);
      await seq.until(Math.ceil(n / 2));
      await seq.done;
      done.push(n);
    }));
    await clock.advance(10);
    await all;
    expect(done.sort((a, b) => a - b)).toEqual([1, 7, 333, 1001]);
    expect(model.snapshot().running).toBe(0);
  });

  test('rejects a negative per-sequence step cost', () => {
    expect(() => new TimingModel({ prefillTps: 0, decodeTps: 1, maxConcurrency: 1, decodeStepPerSeqMs: -1 })).toThrow(/≥ 0/);
  });
});
