import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { CompletionRecord } from '../../src/core/records.ts';
import { rescoreCompletion, scoreLogprob } from '../../src/sim/policy.ts';
import { chooseVariant, parseBehaviourScript } from '../../src/sim/script.ts';
import { SimServer } from '../../src/sim/server.ts';
import { drawVariant, logSoftmax, sessionRescorer, VariantPolicy, type PolicyExport } from '../../src/sim/variant-policy.ts';

const bashTool = { type: 'function', function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', required: ['command'], properties: { command: { type: 'string' } } } } };
const script = {
  policy: 'fix-f',
  variants: {
    solve: { weight: 0.5, steps: [{ shell: 'cat f.txt' }, { say: 'fixed. done' }] },
    give_up: { weight: 0.5, steps: [{ shell: 'ls' }, { say: 'sorry' }] },
  },
};

describe('categorical variant policy', () => {
  test('log softmax normalises; logits log(weight) draw exactly what chooseVariant draws', () => {
    const lps = logSoftmax(['a', 'b', 'c'], { a: Math.log(0.5), b: Math.log(0.25), c: Math.log(0.25) });
    expect(Math.exp(lps.a!) + Math.exp(lps.b!) + Math.exp(lps.c!)).toBeCloseTo(1, 12);
    expect(lps.a).toBeCloseTo(Math.log(0.5), 12);
    const parsed = parseBehaviourScript({ variants: { a: { weight: 0.5, steps: [] }, b: { weight: 0.25, steps: [] }, c: { weight: 0.25, steps: [] } } });
    const policy = new VariantPolicy();
    policy.load({ t: { a: Math.log(0.5), b: Math.log(0.25), c: Math.log(0.25) } }, '0');
    const counts: Record<string, number> = {};
    for (let i = 0; i < 400; i++) {
      const drawn = policy.choose('t', parsed, `s-${i}`, '0')!;
      expect(drawn.choice.variant).toBe(chooseVariant(parsed, `s-${i}`));
      counts[drawn.choice.variant] = (counts[drawn.choice.variant] ?? 0) + 1;
    }
    expect(counts.a! / 400).toBeGreaterThan(0.4);
    expect(counts.a! / 400).toBeLessThan(0.6);
  });

  test('a variant without a logit is never drawn; bad logits name their path', () => {
    expect(drawVariant(logSoftmax(['a', 'b'], { b: 0 }), 0)).toBe('b');
    const policy = new VariantPolicy();
    expect(() => policy.load({ t: { a: 'x' } }, '1')).toThrow('policy.t.a must be a finite number');
    expect(() => policy.load({ t: [] }, '1')).toThrow('policy.t must be an object');
    expect(policy.active).toBe(false);
  });

  test('a session keeps the variant drawn at its first call after the logits change', () => {
    const parsed = parseBehaviourScript(script);
    const policy = new VariantPolicy();
    policy.load({ 'fix-f': { solve: 10, give_up: -10 } }, '1');
    const first = policy.choose('task@1', parsed, 'sess', '1')!;
    expect(first).toMatchObject({ first: true, choice: { policy: 'fix-f', variant: 'solve', version: '1' } });
    policy.load({ 'fix-f': { solve: -10, give_up: 10 } }, '2');
    expect(policy.choose('task@1', parsed, 'sess', '2')).toMatchObject({ first: false, choice: { variant: 'solve', version: '1' } });
    expect(policy.choose('task@2', parsed, 'other', '2')!.choice.variant).toBe('give_up');
    const exported = policy.export('2');
    expect(exported.versions.map((v) => v.version)).toEqual(['1', '2']);
    expect(exported.tasks['task@1']).toEqual({ policy: 'fix-f', seed: null, variants: { solve: 0.5, give_up: 0.5 } });
  });
});

describe('polar sim: POST /update_weights and the choice logprob', () => {
  let sim: SimServer;
  beforeAll(async () => {
    sim = await SimServer.start({ port: 0, prefillTps: 0, decodeTps: 0, scripts: { 'task-a': script }, maxModelLen: 4096 });
  });
  afterAll(() => sim.stop());
  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${sim.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as any };
  };
  const chat = (sessionId: string, messages: unknown[]) =>
    post('/v1/chat/completions', { messages, tools: [bashTool], logprobs: true, return_token_ids: true, max_tokens: 300 }, { 'x-polar-session': sessionId, 'x-polar-task': 'task-a' });

  test('without logits the scripted weights choose and logprobs are the toy model\'s alone', async () => {
    const { body } = await chat('plain-1', [{ role: 'user', content: 'fix f' }]);
    const choice = body.choices[0];
    expect(choice.logprobs.content.map((c: any) => c.logprob)).toEqual(rescoreCompletion(body.prompt_token_ids, choice.token_ids));
  });

  test('loaded logits bump the version, steer the variant, and add log π(variant) to the first sampled token only', async () => {
    const bad = await post('/update_weights', { policy: { 'fix-f': { solve: 'high' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('policy.fix-f.solve');
    expect((await post('/update_weights', { nope: 1 })).status).toBe(400);
    const before = sim.policyVersion;
    const up = await post('/update_weights', { policy: { 'fix-f': { solve: 2, give_up: 0 } } });
    expect(up.body.weight_version).toBe(String(Number(before) + 1));
    const version = up.body.weight_version as string;
    const pSolve = Math.exp(2) / (Math.exp(2) + 1);
    let solved = 0;
    const records: CompletionRecord[] = [];
    for (let i = 0; i < 60; i++) {
      const sid = `learn-${i}`;
      const turn1 = [{ role: 'user', content: 'fix f' }];
      const { body } = await chat(sid, turn1);
      const c = body.choices[0];
      const text: string = c.message.tool_calls[0].function.arguments;
      const variant = text.includes('cat f.txt') ? 'solve' : 'give_up';
      if (variant === 'solve') solved++;
      const plain = rescoreCompletion(body.prompt_token_ids, c.token_ids);
      const lps = c.logprobs.content.map((x: any) => x.logprob);
      const choiceLp = variant === 'solve' ? Math.log(pSolve) : Math.log(1 - pSolve);
      expect(lps[0]).toBe(Math.fround(plain[0]! + choiceLp));
      expect(lps.slice(1)).toEqual(plain.slice(1));
      const { body: choices } = await post('/sim/policy/choices', { session_ids: [sid] });
      expect(choices.choices[sid]).toMatchObject({ policy: 'fix-f', variant, version });
      expect(choices.choices[sid].logprob).toBeCloseTo(choiceLp, 12);
      // The second turn continues the same variant and carries no choice term.
      const turn2 = [...turn1, c.message, { role: 'tool', tool_call_id: c.message.tool_calls[0].id, content: 'out' }];
      const second = await chat(sid, turn2);
      const c2 = second.body.choices[0];
      expect(c2.message.content).toContain(variant === 'solve' ? 'fixed. done' : 'sorry');
      expect(c2.logprobs.content.map((x: any) => x.logprob)).toEqual(rescoreCompletion(second.body.prompt_token_ids, c2.token_ids));
      if (i === 0) {
        const rec = (seq: number, prompt: number[], ids: number[], lp: number[]) => ({ completion_id: `${sid}-${seq}`, session_id: sid, seq, prompt_ids: prompt, response_ids: ids, logprobs: lp, policy_version: version }) as unknown as CompletionRecord;
        records.push(rec(0, body.prompt_token_ids, c.token_ids, lps), rec(1, second.body.prompt_token_ids, c2.token_ids, c2.logprobs.content.map((x: any) => x.logprob)));
      }
    }
    expect(solved / 60).toBeGreaterThan(pSolve - 0.2);
    expect(solved / 60).toBeLessThan(Math.min(1, pSolve + 0.2));
    // The export re-scores the recorded samples exactly; without it the first token does not re-score.
    const exported = (await (await fetch(`${sim.url}/sim/policy`)).json()) as PolicyExport;
    expect(exported.tasks['task-a']!.policy).toBe('fix-f');
    const rescore = sessionRescorer(exported, 'task-a', records[0]!.session_id, records);
    for (const r of records) {
      const context = [...r.prompt_ids];
      r.response_ids.forEach((id, j) => {
        expect(rescore(context, id, { record: r, index: j })).toBe(r.logprobs[j]!);
        context.push(id);
      });
    }
    expect(scoreLogprob(records[0]!.prompt_ids, records[0]!.response_ids[0]!)).not.toBe(records[0]!.logprobs[0]!);
  });
});
