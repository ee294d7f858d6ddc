import { expect, test } from 'bun:test';
import { scoreCompletionJson } from '../../src/cli/sim.ts';
import { POLICY_CONTEXT_K, rescoreCompletion, scoreLogprob } from '../../src/sim/policy.ts';

test('scoreLogprob is ≤ 0, float32-exact and depends only on the last K ids and the token', () => {
  const seen = new Set<number>();
  for (let token = 0; token < 2000; token++) {
    const lp = scoreLogprob([1, 2, 3, 4, 5], token);
    expect(lp).toBeLessThan(0);
    expect(Math.fround(lp)).toBe(lp);
    expect(new Float32Array([lp])[0]).toBe(lp);
    seen.add(lp);
  }
  expect(seen.size).toBeGreaterThan(1900); // varies with the token
  expect(POLICY_CONTEXT_K).toBe(4);
  expect(scoreLogprob([99, 98, 2, 3, 4, 5], 7)).toBe(scoreLogprob([1, 2, 3, 4, 5], 7));
  expect(scoreLogprob([1, 2, 3, 4, 6], 7)).not.toBe(scoreLogprob([1, 2, 3, 4, 5], 7));
  expect(scoreLogprob([3, 4, 5], 7)).not.toBe(scoreLogprob([2, 3, 4, 5], 7));
});

test('rescoreCompletion conditions each token on the prompt and the tokens before it', () => {
  const prompt = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198];
  const response = [9707, 0, 1096, 374, 151645];
  const expected = response.map((id, i) => scoreLogprob([...prompt, ...response.slice(0, i)], id));
  expect(rescoreCompletion(prompt, response)).toEqual(expected);
  expect(rescoreCompletion([5], [6, 7])).toEqual([scoreLogprob([5], 6), scoreLogprob([5, 6], 7)]);
  expect(rescoreCompletion(prompt, [])).toEqual([]);
});

test('polar sim score input handling', () => {
  const out = scoreCompletionJson(JSON.stringify({ prompt_ids: [1, 2], response_ids: [3, 4], extra: 'ignored' }));
  expect(out.logprobs).toEqual(rescoreCompletion([1, 2], [3, 4]));
  expect(() => scoreCompletionJson('{')).toThrow(/not JSON/);
  expect(() => scoreCompletionJson('{"prompt_ids": [1], "response_ids": ["a"]}')).toThrow(/response_ids/);
});
