/** core/element-runs.ts: the last run over an array is found by its first element and shared up to the first other object. */
import { expect, test } from 'bun:test';
import { ElementRuns, type OutputRun } from '../../src/core/element-runs.ts';

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
