import { describe, expect, test } from 'bun:test';
import { randomId, timeOrderedId } from '../../src/core/ids.ts';

describe('timeOrderedId', () => {
  test('has randomId\'s shape: prefix, underscore, 24 hex chars', () => {
    expect(timeOrderedId('cmpl')).toMatch(/^cmpl_[0-9a-f]{24}$/);
    expect(randomId('cmpl')).toMatch(/^cmpl_[0-9a-f]{24}$/);
  });

  test('starts with the millisecond it was minted in', () => {
    const before = Date.now();
    const id = timeOrderedId('cmpl');
    const after = Date.now();
    const ms = parseInt(id.slice(5, 17), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
  });

  test('an id of a later millisecond sorts after an earlier one, as text', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(timeOrderedId('cmpl'));
      await Bun.sleep(2);
    }
    expect([...ids].sort()).toEqual(ids);
    // randomId gives no such order: 5 ids in mint order are sorted with probability 1/120; 20 tries all sorted would be luck.
    const randomSorted = Array.from({ length: 20 }, () => {
      const r = Array.from({ length: 5 }, () => randomId('cmpl'));
      return [...r].sort().join() === r.join();
    });
    expect(randomSorted.every(Boolean)).toBe(false);
  });

  test('ids of the same millisecond differ (48 random bits)', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => timeOrderedId('cmpl')));
    expect(ids.size).toBe(10_000);
  });
});

describe('the proxy mints time-ordered completion ids unless told otherwise', () => {
  test('createProxyRuntime without newId uses timeOrderedId', async () => {
    const { createProxyRuntime } = await import('../../src/proxy/context.ts');
    const rt = createProxyRuntime({ engine: { kind: 'vllm', mode: 'chat' }, store: {}, sessions: {} } as never, []);
    const ms = parseInt(rt.newId('cmpl').slice(5, 17), 16);
    expect(Math.abs(ms - Date.now())).toBeLessThan(60_000);
  });
});
