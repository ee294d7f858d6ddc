/**
 * core/int32-twin.ts appendInt32: a conversation's ids are extended in place while nothing wrote past the view, and
 * every view handed out keeps its values whatever is appended later (a sibling extension of a shorter view is copied).
 * definePromptIds: a record's prompt ids held as an Int32Array until something reads the JS array.
 */
import { expect, test } from 'bun:test';
import { appendInt32, definePromptIds, int32Of, int32ToArray, int32Twin, isTokenIds, pairInt32, promptIdsInt32, promptIdsLength, sameIds } from '../../src/core/int32-twin.ts';

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

test('a view that ends at its buffer\'s high-water mark is extended in place; earlier views keep their values', () => {
  const first = appendInt32(undefined, range(0, 100))!;
  expect(int32ToArray(first)).toEqual(range(0, 100));
  const second = appendInt32(first, range(100, 10))!;
  expect(second.buffer).toBe(first.buffer); // in place: ~25 % spare room
  expect(int32ToArray(second)).toEqual(range(0, 110));
  const third = appendInt32(second, [7, 8])!;
  expect(third.buffer).toBe(first.buffer);
  expect(int32ToArray(first)).toEqual(range(0, 100));
  expect(int32ToArray(second)).toEqual(range(0, 110));
  expect(int32ToArray(third)).toEqual([...range(0, 110), 7, 8]);
});

test('a sibling extension of a view another extension already wrote past is copied, so neither sees the other', () => {
  const base = appendInt32(undefined, range(0, 50))!;
  const a = appendInt32(base, [1001, 1002])!;
  const b = appendInt32(base, [2001])!; // base no longer ends at the high-water mark
  expect(b.buffer).not.toBe(base.buffer);
  expect(int32ToArray(a)).toEqual([...range(0, 50), 1001, 1002]);
  expect(int32ToArray(b)).toEqual([...range(0, 50), 2001]);
  // A prefix view is never extended in place either.
  const prefix = a.subarray(0, 10);
  const c = appendInt32(prefix, [3001])!;
  expect(int32ToArray(c)).toEqual([...range(0, 10), 3001]);
  expect(int32ToArray(a)).toEqual([...range(0, 50), 1001, 1002]);
});

test('running out of spare room copies into a larger buffer; a non-int32 value gives no twin and changes nothing seen', () => {
  let twin = appendInt32(undefined, [1])!;
  const buffers = new Set<ArrayBufferLike>([twin.buffer]);
  const ids = [1];
  for (let i = 0; i < 500; i++) {
    twin = appendInt32(twin, [i])!;
    ids.push(i);
    buffers.add(twin.buffer);
  }
  expect(int32ToArray(twin)).toEqual(ids);
  expect(buffers.size).toBeGreaterThan(1);
  expect(buffers.size).toBeLessThan(20); // amortised: not a copy per append
  for (const bad of [2 ** 31, -(2 ** 31) - 1, 1.5, Number.NaN]) expect(appendInt32(twin, [5, bad])).toBeUndefined();
  // The refused values were written past the high-water mark only: the next append still extends in place and is exact.
  const next = appendInt32(twin, [42])!;
  expect(int32ToArray(next)).toEqual([...ids, 42]);
  expect(appendInt32(undefined, [-(2 ** 31), 2 ** 31 - 1, 0])).toEqual(new Int32Array([-(2 ** 31), 2 ** 31 - 1, 0]));
});

test('sameIds: the same array, twins compared natively, plain arrays element by element', () => {
  const a = [1, 2, 3];
  const b = [1, 2, 3];
  expect(sameIds(a, a)).toBe(true);
  expect(sameIds(a, b)).toBe(true);
  expect(sameIds(a, [1, 2, 4])).toBe(false);
  expect(sameIds(a, [1, 2])).toBe(false);
  const ta = appendInt32(undefined, a)!;
  const tb = appendInt32(undefined, b)!;
  pairInt32(a, ta);
  pairInt32(b, tb);
  expect(sameIds(a, b)).toBe(true);
  const c = [1, 2, 9];
  pairInt32(c, appendInt32(undefined, c)!);
  expect(sameIds(a, c)).toBe(false);
  expect(sameIds(c, [1, 2, 9])).toBe(true); // one side without a twin
});

test('definePromptIds: the store and metrics read the Int32Array; the first read builds the array, paired with it, as a data property', () => {
  const ids = Int32Array.from([5, 6, 7]);
  const record = { completion_id: 'c', prompt_ids: [] as number[], response_ids: [1] };
  definePromptIds(record, ids);
  expect(promptIdsInt32(record)).toBe(ids);
  expect(promptIdsLength(record)).toBe(3);
  expect(Object.getOwnPropertyDescriptor(record, 'prompt_ids')!.get).toBeDefined(); // nothing built yet
  expect(Object.keys(record)).toEqual(['completion_id', 'prompt_ids', 'response_ids']);
  const array = record.prompt_ids;
  expect(array).toEqual([5, 6, 7]);
  expect(Array.isArray(array)).toBe(true);
  expect(record.prompt_ids).toBe(array); // built once
  const descriptor = Object.getOwnPropertyDescriptor(record, 'prompt_ids')!;
  expect([descriptor.value, descriptor.writable, descriptor.enumerable, descriptor.get]).toEqual([array, true, true, undefined]);
  expect(int32Twin(array)).toBe(ids);
  expect(promptIdsInt32(record)).toBe(ids);
  expect(promptIdsLength(record)).toBe(3);
});

test('definePromptIds: JSON, a spread and an assignment see a plain number[] property', () => {
  const make = () => {
    const record = { a: 1, prompt_ids: [] as number[], b: 2 };
    definePromptIds(record, Int32Array.from([9, 8]));
    return record;
  };
  expect(JSON.stringify(make())).toBe('{"a":1,"prompt_ids":[9,8],"b":2}');
  const spread = { ...make() };
  expect(Object.getOwnPropertyDescriptor(spread, 'prompt_ids')!.value).toEqual([9, 8]);
  const assigned = make();
  assigned.prompt_ids = [1, 2, 3, 4];
  expect(assigned.prompt_ids).toEqual([1, 2, 3, 4]);
  expect(Object.getOwnPropertyDescriptor(assigned, 'prompt_ids')!.writable).toBe(true);
  expect(promptIdsLength(assigned)).toBe(4); // the assigned array, not the Int32Array given before
  expect(promptIdsInt32(assigned)).toBeUndefined();
});

test('TokenIds: an Int32Array is token ids as it is, an array needs integers; int32Of gives the Int32Array or the twin', () => {
  const view = Int32Array.from([1, 2]);
  expect([isTokenIds(view), isTokenIds([1, 2]), isTokenIds([1.5]), isTokenIds(new Float64Array(2)), isTokenIds(null)]).toEqual([true, true, false, false, false]);
  expect(int32Of(view)).toBe(view);
  const paired = [1, 2];
  pairInt32(paired, view);
  expect(int32Of(paired)).toBe(view);
  expect(int32Of([1, 2])).toBeUndefined();
});

test('definePromptIds: a frozen record keeps the accessor and returns one built array; a deleted or redefined property is no longer the Int32Array', () => {
  const ids = Int32Array.from([4, 5, 6]);
  const frozen = { prompt_ids: [] as number[] };
  definePromptIds(frozen, ids);
  Object.freeze(frozen);
  const array = frozen.prompt_ids;
  expect(array).toEqual([4, 5, 6]);
  expect(frozen.prompt_ids).toBe(array);
  expect(JSON.stringify(frozen)).toBe('{"prompt_ids":[4,5,6]}');
  expect([promptIdsInt32(frozen), promptIdsLength(frozen)]).toEqual([ids, 3]);

  const deleted: { prompt_ids?: number[] } = { prompt_ids: [] };
  definePromptIds(deleted as { prompt_ids: number[] }, ids);
  delete deleted.prompt_ids;
  expect(promptIdsInt32(deleted as { prompt_ids: number[] })).toBeUndefined();
  deleted.prompt_ids = [1, 2];
  expect([promptIdsInt32(deleted as { prompt_ids: number[] }), promptIdsLength(deleted as { prompt_ids: number[] })]).toEqual([undefined, 2]);
});
