/**
 * core/element-runs.ts: the last run over an array is found by its first element and shared up to the first other
 * object; a split run is continued by a call that extends it, reading only the new elements.
 */
import { expect, test } from 'bun:test';
import { ElementRuns, SplitRuns, visitNew, type ElementRun, type SplitRun } from '../../src/core/element-runs.ts';

interface OutputRun<I, O> extends ElementRun<I> {
  outputs: readonly O[];
}

test('the leading elements that are the very objects of the last run are shared; anything else is not', () => {
  const runs = new ElementRuns<{ n: number }, OutputRun<{ n: number }, string>>();
  const [a, b, c, d] = [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }];
  expect(runs.shared([a, b])).toEqual({ run: undefined, shared: 0 });
  expect(runs.shared([])).toEqual({ run: undefined, shared: 0 });
  runs.keep({ inputs: [a, b, c], outputs: ['A', 'B', 'C'] });
  expect(runs.shared([a, b, c, d]).shared).toBe(3);
  expect(runs.shared([a, b]).shared).toBe(2);
  expect(runs.shared([a, { n: 2 }, c]).shared).toBe(1); // an equal copy is not the same object
  expect(runs.shared([a, c, b]).shared).toBe(1);
  expect(runs.shared([b, c]).shared).toBe(0); // another first element: another run
  const { run } = runs.shared([a]);
  expect(run?.outputs).toEqual(['A', 'B', 'C']);
  runs.keep({ inputs: [a, d], outputs: ['A', 'D'] }); // the newest run replaces the last one
  expect(runs.shared([a, b, c]).shared).toBe(1);
  expect(runs.shared([a, d]).run?.outputs).toEqual(['A', 'D']);
});

test('a split run: leading apart elements are left out; a call that extends the run reads apart() only for its leading and new elements', () => {
  type Item = { apart: boolean; n: number };
  const runs = new SplitRuns<Item, SplitRun<Item>>();
  const asked: number[] = [];
  const apart = (item: Item) => {
    asked.push(item.n);
    return item.apart;
  };
  const item = (n: number, isApart = false): Item => ({ n, apart: isApart });
  const [s0, a, b, s1, c, d, s2] = [item(0, true), item(1), item(2), item(3, true), item(4), item(5), item(6, true)];
  const first = runs.continuation([s0, a, b, s1], apart);
  expect(first).toMatchObject({ lead: 1, tail: [a, b, s1], run: undefined, shared: 0, apartAt: null });
  // Without a continued run the caller asks for the rest itself.
  const known: number[] = [];
  const seen: [number, boolean][] = [];
  expect(visitNew(first.tail, 0, first.apartAt, known, apart, (i, isApart) => seen.push([i, isApart]))).toEqual([2]);
  expect(seen).toEqual([[0, false], [1, false], [2, true]]);
  runs.keep({ inputs: first.tail, apartAt: [2] });
  // The next call: a fresh leading apart element, the same three, and new ones: apart() sees only those.
  asked.length = 0;
  const next = runs.continuation([item(10, true), a, b, s1, c, s2, d], apart);
  expect(next).toMatchObject({ lead: 1, shared: 3, apartAt: [2, 4] });
  expect(asked).toEqual([10, 1, 4, 6, 5]); // the lead, the first non-apart (it ends the lead), then the new ones
  seen.length = 0;
  asked.length = 0;
  expect(visitNew(next.tail, 3, next.apartAt, [], apart, (i, isApart) => seen.push([i, isApart]))).toEqual([2, 4]);
  expect(seen).toEqual([[3, false], [4, true], [5, false]]);
  expect(asked).toEqual([]);
  // A call that does not start with the whole run (an edit) is not continued.
  expect(runs.continuation([a, c], apart)).toMatchObject({ lead: 0, shared: 1, apartAt: null });
});
