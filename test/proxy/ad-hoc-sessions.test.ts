/**
 * `polar proxy`'s ad-hoc session directory (src/proxy/sessions.ts): a key maps to the same session every time, and the
 * key cache stays bounded however many sessions arrive (ad-hoc sessions never end).
 */
import { expect, test } from 'bun:test';
import { adHocSessions } from '../../src/proxy/sessions.ts';

test('the key cache holds at most maxCachedKeys keys; an evicted key resolves to the same session again', () => {
  const sessions = adHocSessions({ maxCachedKeys: 3, taskId: 't' });
  const secret = 'sk-not/a safe id';
  const first = sessions.resolve(secret)!;
  expect(first.session_id).toMatch(/^key-[0-9a-f]{24}$/);
  expect(first.task_id).toBe('t');
  for (let i = 0; i < 10; i++) expect(sessions.resolve(`run-${i}`)!.session_id).toBe(`run-${i}`);
  expect(sessions.cachedKeys()).toBe(3);
  const again = sessions.resolve(secret)!;
  expect(again).not.toBe(first); // evicted, so resolved afresh ...
  expect(again).toEqual(first); // ... to the same session
  expect(sessions.resolve(secret)).toBe(again); // and cached again
  expect(sessions.cachedKeys()).toBe(3);
});

test('by default 4,096 keys are kept: a stream of new sessions does not grow the directory', () => {
  const sessions = adHocSessions();
  for (let i = 0; i < 5000; i++) sessions.resolve(`soak-${i}`);
  expect(sessions.cachedKeys()).toBe(4096);
  expect(sessions.resolve('')!.session_id).toBe(sessions.defaultSession);
});
