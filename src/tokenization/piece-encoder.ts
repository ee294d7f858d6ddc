/**
 * A faster `encode` for the byte-level BPE tokenizers (Qwen3, Llama 3.x, DeepSeek-V3, gpt-oss), exact by construction:
 * it runs the same steps as `@huggingface/tokenizers`' `Tokenizer.encode(text, { add_special_tokens: false })` with the
 * library's own objects (its added-token splitters, normaliser, pre-tokenizers, BPE model and vocabulary), and only
 * adds a memo of the ids of each piece the leading regex `Split` pre-tokenizers cut the text into.
 *
 * Why it is exact: a pre-tokenizer `Sequence` applies each later pre-tokenizer to every piece of the earlier ones on
 * its own, and the BPE model encodes every pre-token on its own (merges never cross a pre-token), so a piece of the
 * leading splits always encodes to the same ids wherever it occurs. The memo therefore only skips work whose answer is known.
 * A model that fuses unknown tokens across pre-tokens (`fuse_unk`) and added tokens that strip the text around them
 * break that independence, and the per-section rewrites `remove_space` and lower-casing are steps this encoder does not
 * run: `pieceEncoder` returns null for all of them and the caller keeps the library's `encode`. Before it is used, it is compared with the library on a
 * probe text covering scripts, digits, contractions, whitespace runs and the tokenizer's own added tokens (null on
 * any difference), and token mode's golden check compares the ids with the engine's own tokenizer at run time.
 *
 * Why our own: the library's `encode` re-maps every pre-token's bytes (`Array.from(...).join`), keeps an LRU with a
 * delete + set per token, walks its added-token trie from every character and collects the split pattern's matches one
 * iterator step at a time; on a 644-character `ls -l` tool result (384 tokens) that was ~0.25 ms, the largest part of
 * token mode's per-turn CPU (bench/README.md, session 13). Here a repeated piece is one Map lookup, text that holds no
 * first character of an added token skips the trie, and a split pattern's matches are collected natively when they cover
 * the text; the memo keeps at most 2 × 32,768 pieces of at most 64 code units each, and 2 × 2^19 key units plus ids,
 * per tokenizer.
 * Pinned to `@huggingface/tokenizers` 0.2.0: the fields read below are that version's (its `Tokenizer` constructor); a
 * missing field makes `pieceEncoder` return null. Source: https://huggingface.co/docs/tokenizers/pipeline
 */
import type { Tokenizer } from '@huggingface/tokenizers';

/** The library's callable objects and tables this encoder reads (fields of `@huggingface/tokenizers` 0.2.0's `Tokenizer`). */
interface LibraryTokenizer {
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: { tokenizers?: unknown[] } | null;
  model: ((tokens: string[]) => string[]) & { tokens_to_ids: Map<string, number>; unk_token_id?: number; fuse_unk?: boolean };
  added_tokens: { content: string; lstrip?: boolean; rstrip?: boolean }[];
  added_tokens_map: Map<string, { id: number }>;
  splitter_unnormalized: LibrarySplitter;
  splitter_normalized: LibrarySplitter;
  remove_space?: boolean;
  do_lowercase_and_remove_accent?: boolean;
}

/** The library's added-token splitter: a trie of the tokens (`trie`, keyed by UTF-16 code unit) and its `split`. */
interface LibrarySplitter {
  trie?: Record<string, unknown>;
  split(text: string): string[];
}

/** A pre-tokenizer of the library: `pre_tokenize_text` cuts one string, `pre_tokenize` maps a list of pieces. */
interface LibraryPreTokenizer {
  /** A `Split`'s compiled pattern (with `config.invert` and `config.behavior`). */
  pattern?: RegExp | null;
  config?: { type?: string; invert?: boolean; behavior?: string };
  pre_tokenize_text(text: string, options?: unknown): string[];
  pre_tokenize(pieces: string[], options?: unknown): string[];
}

/** Pre-tokenizer types whose output for a piece depends on that piece alone. */
const PER_PIECE_STAGES = new Set(['Split', 'ByteLevel', 'Digits']);

/**
 * Longest piece memoised, UTF-16 code units: longer ones (a run of indentation, a long identifier) rarely repeat, and
 * a count-bounded memo must not hold megabytes of them.
 */
const MAX_MEMO_PIECE = 64;

/**
 * Key code units plus ids held per generation: with pieces of up to 64 units, each of up to ~130 ids (rare scripts),
 * the count bound alone would let two generations hold ~50 MB; this keeps them to a few MB. Common text (a piece of ~4
 * units, one id) reaches the count bound first.
 */
const MAX_GENERATION_UNITS = 1 << 19;

/** Pieces memoised per generation; two generations are kept, so the memo holds at most twice this many. */
const MEMO_GENERATION = 32_768;

/**
 * Text that exercises the pre-tokenizers and the BPE merges: Latin with contractions, digits runs, whitespace runs and
 * line ends, punctuation runs, CJK and kana, combining marks, an emoji, a lone surrogate-free astral symbol and code.
 */
const PROBE = [
  "Hello world! It's 12345 o'clock; we're   here,\tyou'll see.\n\n  indented\r\n",
  'def f(x):\n    return {"a": [1, 2.5e-3, null]}  # comment\n',
  '中文测试，日本語のテキスト。カタカナ 123 한국어 éàü naïve café e\u0301 🚀 𝔘',
  '-rw-r--r-- 1 dev dev  12345 Mar  1 12:00 src/pkg_1/module_2.py\n\t\n   \n',
  'ALLCAPS CamelCase snake_case kebab-case URL https://example.com/a?b=c&d=e',
].join('');

function isPreTokenizer(value: unknown): value is LibraryPreTokenizer {
  return typeof (value as LibraryPreTokenizer | null)?.pre_tokenize_text === 'function' && typeof (value as LibraryPreTokenizer).pre_tokenize === 'function';
}

/**
 * Build the memoising encoder for `tokenizer`, or null when its pipeline is not one this encoder reproduces exactly
 * (see the file comment) or when it differs from the library on the probe text.
 * @param tokenizer a loaded `@huggingface/tokenizers` Tokenizer.
 * @param config its tokenizer.json (the `pre_tokenizer` and `model` sections are checked).
 * @param options.memoGeneration pieces per memo generation (default 32,768; the memo holds at most twice as many).
 * @returns `encode(text)`: vocabulary ids of `text` (a fresh array per call), equal to
 *   `tokenizer.encode(text, { add_special_tokens: false }).ids`; or null.
 */
export function pieceEncoder(tokenizer: Tokenizer, config: Record<string, unknown>, options: { memoGeneration?: number } = {}): ((text: string) => number[]) | null {
  const generation = options.memoGeneration ?? MEMO_GENERATION;
  if (!Number.isInteger(generation) || generation < 1) throw new RangeError(`memoGeneration must be a positive integer, got ${generation}`);
  const lib = tokenizer as unknown as LibraryTokenizer;
  const pre = config.pre_tokenizer as { type?: string; pretokenizers?: { type?: string; invert?: boolean }[] } | null | undefined;
  const model = config.model as { type?: string; fuse_unk?: boolean; dropout?: number | null } | undefined;
  // Stages that take no per-section options (Metaspace's `prepend_scheme: first` reads the section index).
  if (pre?.type !== 'Sequence' || pre.pretokenizers?.[0]?.type !== 'Split' || !pre.pretokenizers.every((p) => PER_PIECE_STAGES.has(p.type ?? ''))) return null;
  if (model?.type !== 'BPE' || model.fuse_unk === true || (model.dropout ?? null) !== null) return null;
  if (typeof lib.model !== 'function' || !(lib.model.tokens_to_ids instanceof Map) || lib.model.fuse_unk) return null;
  if (!(lib.added_tokens_map instanceof Map) || !Array.isArray(lib.added_tokens) || lib.added_tokens.some((t) => t.lstrip || t.rstrip)) return null;
  if (typeof lib.splitter_unnormalized?.split !== 'function' || typeof lib.splitter_normalized?.split !== 'function') return null;
  if (lib.remove_space === true || lib.do_lowercase_and_remove_accent === true) return null;
  const stages = lib.pre_tokenizer?.tokenizers;
  if (!Array.isArray(stages) || !stages.every(isPreTokenizer)) return null;
  // The leading run of Split stages cuts the pieces the memo is keyed by (DeepSeek-V3 has three: digits, CJK, words);
  // the stages after it (ByteLevel) and BPE run per piece on a miss.
  const splitCount = pre.pretokenizers.findIndex((p) => p.type !== 'Split');
  const splits = stages.slice(0, splitCount < 0 ? stages.length : splitCount).map(quickPieces);
  const rest = stages.slice(splits.length);

  const { normalizer, added_tokens_map: added } = lib;
  const unnormalized = quickSplit(lib.splitter_unnormalized);
  const normalized = quickSplit(lib.splitter_normalized);
  const piecesOf = (section: string): string[] => {
    let pieces = splits[0]!(section);
    for (let k = 1; k < splits.length; k++) pieces = pieces.flatMap(splits[k]!);
    return pieces;
  };
  const toIds = lib.model.tokens_to_ids;
  const unk = lib.model.unk_token_id;
  const bpe = lib.model;
  // A piece's ids: one number for the common single-token piece (no array kept), else the array.
  let memo = new Map<string, number | number[]>();
  let older = new Map<string, number | number[]>();
  /** Code units of the keys plus ids held by `memo`. */
  let held = 0;

  /** Ids of one piece: the pre-tokenizers after the splits, the BPE model and the id lookup the library's encode does. */
  const encodePiece = (piece: string): number | number[] => {
    let pieces = [piece];
    for (const stage of rest) pieces = stage.pre_tokenize(pieces);
    const tokens = bpe(pieces);
    const ids = new Array<number>(tokens.length);
    for (let i = 0; i < tokens.length; i++) ids[i] = (added.get(tokens[i]!)?.id ?? toIds.get(tokens[i]!) ?? unk) as number;
    // (An id the vocabulary lacks stays undefined, as in the library's answer; such a piece keeps its array.)
    return ids.length === 1 && ids[0] !== undefined ? ids[0] : ids;
  };

  const pushSection = (out: number[], section: string): void => {
    for (const piece of piecesOf(section)) {
      let ids = memo.get(piece);
      if (ids === undefined && piece.length > MAX_MEMO_PIECE) ids = encodePiece(piece);
      else if (ids === undefined) {
        ids = older.get(piece) ?? encodePiece(piece);
        const units = piece.length + (typeof ids === 'number' ? 1 : ids.length);
        if (memo.size >= generation || held + units > MAX_GENERATION_UNITS) {
          older = memo;
          memo = new Map();
          held = 0;
        }
        memo.set(piece, ids);
        held += units;
      }
      if (typeof ids === 'number') out.push(ids);
      else for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
    }
  };

  const encode = (text: string): number[] => {
    const out: number[] = [];
    for (const section of unnormalized(text)) {
      if (section.length === 0) continue;
      const special = added.get(section);
      if (special !== undefined) {
        out.push(special.id);
        continue;
      }
      const normal = normalizer === null ? section : normalizer(section);
      if (normal.length === 0) continue;
      for (const sub of normalized(normal)) {
        if (sub.length === 0) continue;
        const token = added.get(sub);
        if (token !== undefined) out.push(token.id);
        else pushSection(out, sub);
      }
    }
    return out;
  };

  // The probe, with every added token between its parts, must encode exactly as the library does (twice: the second
  // time from the memo).
  const probe = PROBE + lib.added_tokens.map((t) => `${t.content}x `).join('');
  const expected = tokenizer.encode(probe, { add_special_tokens: false }).ids;
  for (let round = 0; round < 2; round++) {
    const got = encode(probe);
    if (got.length !== expected.length || got.some((id, i) => id !== expected[i])) return null;
  }
  return encode;
}

/**
 * The splitter's `split`, answering `[text]` without walking the trie when no code unit of `text` can start an added
 * token (the trie's first level); `split` itself otherwise. Same output: a match has to start with one of those units.
 */
function quickSplit(splitter: LibrarySplitter): (text: string) => string[] {
  const split = (text: string) => splitter.split(text);
  const starts = splitter.trie === undefined ? [] : Object.keys(splitter.trie);
  if (splitter.trie === undefined || 'end' in splitter.trie) return split;
  if (starts.length === 0) return (text) => (text.length === 0 ? [] : [text]);
  const any = new RegExp(`[${starts.map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}]`);
  return (text) => (text.length === 0 ? [] : any.test(text) ? split(text) : [text]);
}

/**
 * A `Split` stage's pieces of `text`. For an isolating `Split`, the pattern's matches collected natively
 * (`String.prototype.match`) are the pieces whenever they cover the text with no gap, which the word patterns of the
 * byte-level families always do (every character matches one alternative); with a gap (DeepSeek-V3's digit and CJK
 * splits), the library's own `regex_split`.
 */
function quickPieces(stage: LibraryPreTokenizer): (text: string) => string[] {
  const library = (text: string) => stage.pre_tokenize_text(text);
  const pattern = stage.pattern;
  const isolated = stage.config?.invert !== true && (stage.config?.behavior ?? '').toLowerCase() === 'isolated';
  if (!(pattern instanceof RegExp) || !pattern.global || !isolated) return library;
  return (text) => {
    const matches = text.match(pattern);
    if (matches === null) return library(text);
    let covered = 0;
    let empty = false;
    for (const match of matches) {
      covered += match.length;
      if (match.length === 0) empty = true;
    }
    if (covered !== text.length) return library(text);
    return empty ? matches.filter((match) => match.length > 0) : matches;
  };
}
