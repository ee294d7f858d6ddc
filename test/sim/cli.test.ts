/**
 * The timing options of `polar sim` (flags) and of `polar serve --with-sim` (the `sim` config section) reach the
 * simulator's engine step loop: with two sequences decoding, a step takes 1000 / decode_tps + decode_step_per_seq_ms
 * ms (the `polar_sim_decode_step_ms` gauge); without the per-sequence cost it stays 1000 / decode_tps.
 */
import { expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHELL_AGENT_RUNTIME_YAML, startPolar, useScratch } from '../support/polar-cli.ts';

const { dir: scratch, procs } = useScratch('polar-sim-cli-');

/** Two long streams decoding at once (each ≥ 10 s at 100 tok/s), then the decode step gauge; the streams are cancelled. */
async function stepMsWithTwoDecoding(base: string): Promise<number> {
  const streams: { cancel(): Promise<void> }[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, max_tokens: 1000, ignore_eos: true, messages: [{ role: 'user', content: `hi ${i}` }] }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      streams.push(reader);
      // A token frame means the sequence is in the decode batch.
      let text = '';
      while (!text.includes('"content"')) text += new TextDecoder().decode((await reader.read()).value);
    }
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith('polar_sim_decode_step_ms '));
    expect(line).toBeDefined();
    return Number(line!.split(' ')[1]);
  } finally {
    for (const s of streams) await s.cancel();
  }
}

const urlOf = (line: string) => /on (http:\/\/\S+?)[\s,]/.exec(`${line} `)![1]!;

test('polar sim --decode-step-per-seq-ms: a decode step grows with the batch', async () => {
  const batched = await startPolar(['sim', '--port', '0', '--decode-tps', '100', '--decode-step-per-seq-ms', '7'], procs);
  expect(await stepMsWithTwoDecoding(urlOf(batched.line))).toBeCloseTo(17, 6);
  const flat = await startPolar(['sim', '--port', '0', '--decode-tps', '100'], procs);
  expect(await stepMsWithTwoDecoding(urlOf(flat.line))).toBeCloseTo(10, 6);
});

test('polar sim rejects a negative --decode-step-per-seq-ms', async () => {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'sim', '--port', '0', '--decode-step-per-seq-ms', '-1'], { cwd: join(import.meta.dir, '../..'), stdout: 'pipe', stderr: 'pipe' });
  expect(await proc.exited).not.toBe(0);
  expect(await new Response(proc.stderr).text()).toContain('--decode-step-per-seq-ms');
});

test('polar serve --with-sim: sim.decode_step_per_seq_ms in the config', async () => {
  const config = join(scratch, 'polar.yaml');
  mkdirSync(join(scratch, 'work'), { recursive: true });
  writeFileSync(config, [
    'sim: {port: 0, decode_tps: 100, decode_step_per_seq_ms: 7}', 'rollout: {port: 0}',
    `gateway: {nodes: [{node_id: box-0, port: 0, work_root: ${join(scratch, 'work')}, ${SHELL_AGENT_RUNTIME_YAML}}]}`,
    `store: {path: ${join(scratch, 'polar.db')}}`, '',
  ].join('\n'));
  const { line } = await startPolar(['serve', '--config', config, '--with-sim'], procs);
  const sim = /simulator on (http:\/\/\S+)/.exec(line)?.[1];
  expect(sim).toBeDefined();
  expect(await stepMsWithTwoDecoding(sim!)).toBeCloseTo(17, 6);
});
