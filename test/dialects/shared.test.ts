/** Tests of src/dialects/shared/ helpers and of the SSE test parser (test/support/sse.ts) that other suites rely on. */
import { describe, expect, test } from 'bun:test';
import { GatewayError } from '../../src/core/errors.ts';
import { contextOverflowCounts } from '../../src/dialects/shared/context-overflow.ts';
import { imagePartFromUrl, imagePartToUrl } from '../../src/dialects/shared/images.ts';
import { cleanToolSchema } from '../../src/dialects/shared/json-schema.ts';
import { mintReasoningSignature } from '../../src/dialects/shared/signature.ts';
import { argumentsFromToolInput, toolInputFromArguments } from '../../src/dialects/shared/tool-input.ts';
import { joinPath, unknownFieldWarnings } from '../../src/dialects/shared/validate.ts';
import { parseSse, parseSseChunks, splitAtRandom } from '../support/sse.ts';

describe('tool input ↔ raw arguments', () => {
  test('valid objects parse; everything else is wrapped and comes back byte-exact', () => {
    expect(toolInputFromArguments('{"a": 1}')).toEqual({ a: 1 });
    expect(toolInputFromArguments('')).toEqual({});
    for (const raw of ['{"a": ', '[1,2]', '"str"', 'null', '42', 'ls -la', '{"a":1}}']) {
      const input = toolInputFromArguments(raw);
      expect(input).toEqual({ _raw: raw });
      expect(argumentsFromToolInput(input)).toBe(raw);
    }
  });

  test('objects are stringified with their key order; a _raw key holding JSON stays an object', () => {
    expect(argumentsFromToolInput({ b: 1, a: [true, null] })).toBe('{"b":1,"a":[true,null]}');
    expect(argumentsFromToolInput({ _raw: '{"x":1}' })).toBe('{"_raw":"{\\"x\\":1}"}');
    expect(argumentsFromToolInput(undefined)).toBe('{}');
  });
});

describe('helpers', () => {
  test('cleanToolSchema strips $schema and top-level cache_control only', () => {
    const schema = { $schema: 'https://json-schema.org/draft/2020-12/schema', cache_control: { type: 'ephemeral' }, type: 'object', properties: { $schema: { type: 'string' } } };
    expect(cleanToolSchema(schema)).toEqual({ type: 'object', properties: { $schema: { type: 'string' } } });
    expect(cleanToolSchema(undefined)).toEqual({ type: 'object', properties: {} });
    expect(schema.$schema).toBeDefined(); // input untouched
  });

  test('image data URLs round-trip; other URLs are kept', () => {
    const part = imagePartFromUrl('data:image/webp;base64,AAAA');
    expect(part).toEqual({ type: 'image', mediaType: 'image/webp', data: 'AAAA' });
    expect(imagePartToUrl(part)).toBe('data:image/webp;base64,AAAA');
    expect(imagePartFromUrl('https://h/p.png')).toEqual({ type: 'image', mediaType: 'image/*', url: 'https://h/p.png' });
  });

  test('contextOverflowCounts reads vLLM, SGLang, OpenAI and Anthropic wordings', () => {
    const counts = (message: string) => contextOverflowCounts(new GatewayError('context-overflow', message));
    expect(counts("This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (32000 in the messages, 1000 in the completion).")).toEqual({ promptTokens: 33000, maxTokens: 32768 });
    expect(counts("The input (50000 tokens) is longer than the model's context length (40960 tokens).")).toEqual({ promptTokens: 50000, maxTokens: 40960 });
    expect(counts('prompt is too long: 210000 tokens > 200000 maximum')).toEqual({ promptTokens: 210000, maxTokens: 200000 });
    expect(counts('something else')).toBeNull();
  });

  test('minted signatures are deterministic, non-empty and text-dependent', () => {
    expect(mintReasoningSignature('abc')).toBe(mintReasoningSignature('abc'));
    expect(mintReasoningSignature('')).toMatch(/^polar1\.[0-9a-f]{16}$/);
    expect(mintReasoningSignature('abc')).not.toBe(mintReasoningSignature('abd'));
  });

  test('validation helpers', () => {
    expect(joinPath('', ['messages', 2, 'content', 0])).toBe('messages[2].content[0]');
    expect(joinPath('system[1]', ['text'])).toBe('system[1].text');
    expect(unknownFieldWarnings({ a: 1, b: 2 }, new Set(['a']), 'request')).toEqual([{ code: 'unknown-field', message: 'request.b is not supported and was ignored' }]);
  });
});

describe('SSE test parser', () => {
  test('LF, CRLF and CR line ends, multi-line data, comments, event names, unterminated tail dropped', () => {
    const text = 'event: a\r\ndata: 1\r\ndata: 2\r\n\r\n: keep-alive\n\ndata:x\rdata: y\r\rid: 7\ndata: z\n\ndata: never-dispatched';
    expect(parseSse(text)).toEqual({
      events: [
        { event: 'a', data: '1\n2' },
        { event: null, data: 'x\ny' },
        { event: null, data: 'z' },
      ],
      comments: ['keep-alive'],
    });
  });

  test('split between \\r and \\n, and inside multi-byte UTF-8, gives the same events', () => {
    const bytes = new TextEncoder().encode('data: 🎉 ünï 你好\r\n\r\nevent: e\r\ndata: ✓\r\n\r\n');
    const baseline = parseSse(bytes);
    expect(baseline.events).toEqual([{ event: null, data: '🎉 ünï 你好' }, { event: 'e', data: '✓' }]);
    for (let seed = 1; seed <= 50; seed++) expect(parseSseChunks(splitAtRandom(bytes, seed))).toEqual(baseline);
    const sizes = splitAtRandom(bytes, 3).map((p) => p.length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(17);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(bytes.length);
  });
});
