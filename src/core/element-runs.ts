/**
 * What a per-element stage made of each element of the last array it was given, by that array's first element. An
 * agent session sends its whole conversation every call, and the decoders hand back the same objects for the turns
 * it had already (dialects/shared/decode-memo.ts), so a call's leading elements are the previous call's very objects:
 * a stage takes their results from here with one identity compare each, instead of a WeakMap lookup each (0.1–0.4 µs
 * inside a busy proxy, ~150 µs per stage at turn 200 of a Claude Code session, bench/README.md#session-9).
 * Sound only for stages whose result for an element depends on that element and the ones before it (a shared run is
 * a leading one), and on options the caller keys by itself. Entries live as long as the first element (a WeakMap): nothing to evict.
 * Source: https://tc39.es/ecma262/#sec-weakmap-objects
 */
/** What one call of a stage kept: its elements (and whatever the stage made of them). */
export interface ElementRun<I> {
  inputs: readonly I[];
}

/** A run whose record is what each input became (same length as `inputs`). */
export interface OutputRun<I, O> extends ElementRun<I> {
  outputs: readonly O[];
}

export class ElementRuns<I, R extends ElementRun<I>> {
  private readonly runs = new WeakMap<object, R>();

  /**
   * The last run over an array that started with `inputs[0]` (an object), and how many leading elements of `inputs`
   * are its very objects at the same indices. `shared` is 0 when there is no run.
   */
  shared(inputs: readonly I[]): { run: R | undefined; shared: number } {
    const first = inputs[0];
    const run = typeof first === 'object' && first !== null ? this.runs.get(first) : undefined;
    if (run === undefined) return { run, shared: 0 };
    const limit = Math.min(run.inputs.length, inputs.length);
    let shared = 0;
    while (shared < limit && run.inputs[shared] === inputs[shared]) shared++;
    return { run, shared };
  }

  /** Keep this call's run, by its first element when that is an object (its arrays must not be mutated afterwards). */
  keep(run: R): void {
    const first = run.inputs[0];
    if (typeof first === 'object' && first !== null) this.runs.set(first, run);
  }
}
