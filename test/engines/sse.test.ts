/**
 * sseData (src/engines/sse.ts) yields the same events however the body is cut into reads: every cut position, every
 * line-end style (\n, \r\n, \r), a blank line or a \r\n split across two reads, comments, multi-line data, [DONE].
 */
import { expect, test } from 'bun:test';
import { GatewayError } from '../../src/core/errors.ts';
import { parseEventData, sseData } from '../../src/engines/sse.ts';

const utf8 = new TextEncoder();
const text = new TextDecoder();

function bodyOf(parts: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

async function events(parts: Uint8Array[]): Promise<string[]> {
  const out: string[] = [];
  for await (const data of sseData(bodyOf(parts), 'test')) out.push(text.decode(data));
  return out;
}

/** The events by the format's rules, read from the whole text at once. */
function expected(text: string): string[] {
  const out: string[] = [];
  for (const event of text.replace(/\r\n?/g, '\n').split('\n\n')) {
    const lines = event.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
    if (lines.length === 0) continue;
    const data = lines.join('\n');
    if (data === '[DONE]') break;
    out.push(data);
  }
  return out;
}

const stream = (eol: string) =>
  [': keep-alive', '', 'data: {"a":1}', '', 'data: {"b":', 'data: 2}', '', 'event: x', 'data: ü ✓', '', '', 'data:{"c":3}', '', 'data: [DONE]', '', 'data: {"after":true}', '', ''].join(eol);

test('every split of the body into two or three reads gives the events of the whole text, for \\n, \\r\\n and \\r line ends', async () => {
  for (const eol of ['\n', '\r\n', '\r']) {
    const bytes = utf8.encode(stream(eol));
    const want = expected(stream(eol));
    expect(want).toEqual(['{"a":1}', '{"b":\n2}', 'ü ✓', '{"c":3}']);
    expect(await events([bytes])).toEqual(want);
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(await events([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(want);
      const second = Math.min(bytes.length - 1, cut + 3);
      if (second > cut) expect(await events([bytes.subarray(0, cut), bytes.subarray(cut, second), bytes.subarray(second)])).toEqual(want);
    }
    // One byte per read.
    expect(await events(Array.from(bytes, (_, i) => bytes.subarray(i, i + 1)))).toEqual(want);
  }
});

test('a \r\n split so that its \n is a read of its own (or comes after an empty read) ends one line, not two', async () => {
  const reads = ['data: a\r', '\n', '\n', 'data: b\n\n'];
  expect(await events(reads.map((r) => utf8.encode(r)))).toEqual(['a', 'b']);
  expect(await events(['data: a\r', '', '\n', '\n', 'data: b\r\n\r\n'].map((r) => utf8.encode(r)))).toEqual(['a', 'b']);
  expect(await events(['data: a\r', '\r', 'data: b\r', '\n\r\n'].map((r) => utf8.encode(r)))).toEqual(['a', 'b']);
});

test('a large event over many reads is one event; a body without a final blank line still yields its last event', async () => {
  const ids = Array.from({ length: 50_000 }, (_, i) => i);
  const big = `data: {"prompt_token_ids":${JSON.stringify(ids)}}\n\ndata: {"x":1}`;
  const bytes = utf8.encode(big);
  const parts: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += 4096) parts.push(bytes.subarray(at, at + 4096));
  const got = await events(parts);
  expect(got).toHaveLength(2);
  expect(JSON.parse(got[0]!).prompt_token_ids).toEqual(ids);
  expect(got[1]).toBe('{"x":1}');
});

test('parseEventData: small data by JSON.parse, large by the given reader, anything else an upstream error quoting it', () => {
  expect(parseEventData(utf8.encode('{"a":[1,2]}'), 'engine x', () => 'not called')).toEqual({ a: [1, 2] });
  const large = utf8.encode(JSON.stringify({ prompt_token_ids: Array.from({ length: 5000 }, (_, i) => i) }));
  expect(parseEventData(large, 'engine x', (bytes) => bytes.byteLength)).toBe(large.byteLength);
  expect((parseEventData(large, 'engine x') as { prompt_token_ids: number[] }).prompt_token_ids).toHaveLength(5000);
  let error: unknown;
  try {
    parseEventData(utf8.encode('{"cut": tr'), 'engine x');
  } catch (thrown) {
    error = thrown;
  }
  expect(error).toBeInstanceOf(GatewayError);
  expect((error as GatewayError).kind).toBe('upstream');
  expect((error as GatewayError).message).toBe('engine x streamed a chunk that is not JSON: {"cut": tr');
});
