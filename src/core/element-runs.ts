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

/**
 * A run of a stage that handles some elements apart (`apart`, e.g. system messages, which a dialect may build afresh
 * every call): its inputs are the elements after the leading apart ones, and it says where apart elements sit among them.
 */
export interface SplitRun<I> extends ElementRun<I> {
  /** Indices in `inputs` of the apart elements, ascending. */
  apartAt: readonly number[];
}

/** What `continuation` found: see there. */
export interface Continuation<I, R> {
  /** How many leading elements of the array are apart. */
  lead: number;
  /** The array's elements after them (a copy: a run keeps it). */
  tail: I[];
  run: R | undefined;
  /** How many leading elements of `tail` are the run's inputs at the same indices. */
  shared: number;
  /**
   * When `tail` starts with every input of the run (a session's next call): where apart elements sit in `tail`, the
   * run's own and then those among the new elements. Null otherwise (the caller looks at what it needs).
   */
  apartAt: number[] | null;
}

/**
 * The runs of a stage that handles some elements apart: a call that extends the last one reads `apart` only for its
 * leading elements and its new ones, and takes everything else from the run without touching the shared elements
 * (in a busy proxy each object read is a likely cache miss: ~50–100 ns per message at turn 200, bench/README.md).
 */
export class SplitRuns<I, R extends SplitRun<I>> extends ElementRuns<I, R> {
  /** `items` split at its leading apart elements, with the run `tail` continues (see Continuation). */
  continuation(items: readonly I[], apart: (item: I) => boolean): Continuation<I, R> {
    let lead = 0;
    while (lead < items.length && apart(items[lead]!)) lead++;
    const tail = items.slice(lead);
    const { run, shared } = this.shared(tail);
    if (run === undefined || shared !== run.inputs.length) return { lead, tail, run, shared, apartAt: null };
    const apartAt = run.apartAt.slice();
    for (let i = shared; i < tail.length; i++) if (apart(tail[i]!)) apartAt.push(i);
    return { lead, tail, run, shared, apartAt };
  }
}

/**
 * Visit the elements of `tail` from `from` on, each with whether it is apart, and return where the apart elements of
 * `tail` sit. With `apartAt` (a continued run's, see Continuation) that list is read and returned; else `apart` is
 * asked and the apart indices are appended to `known` (those before `from`), which is returned.
 */
export function visitNew<I>(tail: readonly I[], from: number, apartAt: number[] | null, known: number[], apart: (item: I) => boolean, visit: (index: number, isApart: boolean) => void): number[] {
  if (apartAt === null) {
    for (let i = from; i < tail.length; i++) {
      const isApart = apart(tail[i]!);
      if (isApart) known.push(i);
      visit(i, isApart);
    }
    return known;
  }
  let next = apartAt.length;
  while (next > 0 && apartAt[next - 1]! >= from) next--;
  for (let i = from; i < tail.length; i++) {
    const isApart = apartAt[next] === i;
    if (isApart) next++;
    visit(i, isApart);
  }
  return apartAt;
}

/** A split run that keeps what its stage made of each input (null for an apart one, which the stage handles itself). */
export interface SplitOutputRun<I, O> extends SplitRun<I> {
  outputs: readonly (O | null)[];
}

/** What `extendRun` gives: see there. */
export interface Extension<I, O, R> {
  lead: number;
  tail: I[];
  /** One per element of `tail`: null for an apart one, else the run's output or `make`'s. */
  outputs: (O | null)[];
  /** Indices in `tail` of the apart elements, ascending. */
  apartAt: number[];
  /**
   * The run this call extends (every input of it leads `tail`): its outputs are the first `continued.inputs.length`
   * of `outputs`, so what the stage derived from them can be copied. Undefined otherwise: derive from all `outputs`.
   */
  continued: R | undefined;
}

/**
 * One call of a split stage (see SplitRuns): the outputs of the elements shared with the last run (when `usable`
 * says the run's outputs hold for this call, e.g. same options), then `make` for each new element that is not apart.
 * A continued run's own elements are not read at all. The caller keeps its run (`runs.keep`) with these outputs.
 */
export function extendRun<I, O, R extends SplitOutputRun<I, O>>(runs: SplitRuns<I, R>, items: readonly I[], apart: (item: I) => boolean, usable: (run: R) => boolean, make: (item: I) => O): Extension<I, O, R> {
  const { lead, tail, run, shared, apartAt } = runs.continuation(items, apart);
  const reusable = run !== undefined && usable(run);
  const continued = reusable && apartAt !== null ? run : undefined;
  const outputs: (O | null)[] = continued !== undefined ? continued.outputs.slice() : reusable ? run!.outputs.slice(0, shared) : [];
  const known: number[] = [];
  if (continued === undefined) for (let i = 0; i < outputs.length; i++) if (outputs[i] === null) known.push(i);
  const at = visitNew(tail, outputs.length, continued !== undefined ? apartAt : null, known, apart, (i, isApart) => void outputs.push(isApart ? null : make(tail[i]!)));
  return { lead, tail, outputs, apartAt: at, continued };
}
