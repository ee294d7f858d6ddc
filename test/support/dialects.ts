/**
 * Dialect test contexts: the codec context with a fixed clock and sequential ids (so encoded ids and timestamps are
 * stable), an IR response factory, and the recorded requests of a dialect's `__fixtures__` folder.
 * Codec contract: src/core/dialect.ts; fixtures: docs/protocol-notes.md#dialects-in-real-traffic.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixedClock } from '../../src/core/clock.ts';
import type { CodecContext } from '../../src/core/dialect.ts';
import { sequentialIds } from '../../src/core/ids.ts';
import type { IRResponse } from '../../src/core/ir.ts';

/** A CodecContext with `fixedClock()` and `sequentialIds()`; `extra` adds the request, options or path model. */
export function codecContext(extra: Partial<CodecContext> = {}): CodecContext {
  return { now: fixedClock(), newId: sequentialIds(), ...extra };
}

/**
 * An IR response factory: an empty `stop` reply whose id, model, usage and timestamp are the test's `base` values;
 * each call's `overrides` replace fields (content, toolCalls, finishReason, …).
 */
export function irResponseFactory(base: Pick<IRResponse, 'id' | 'model' | 'usage' | 'createdAt'>): (overrides?: Partial<IRResponse>) => IRResponse {
  return (overrides = {}) => ({
    content: [],
    toolCalls: [],
    finishReason: { unified: 'stop', raw: 'stop' },
    warnings: [],
    ...base,
    ...overrides,
  });
}

/** The folder of a dialect's recorded fixtures, e.g. `dialectFixtureDir('gemini')`. */
export function dialectFixtureDir(dialect: string): string {
  return join(import.meta.dir, '../../src/dialects', dialect, '__fixtures__');
}

/** Every `*-request.json` of a dialect's fixtures, by file name, with the recorded request `body`. */
export function recordedRequests(dialect: string): Array<{ name: string; body: Record<string, any> }> {
  const dir = dialectFixtureDir(dialect);
  return readdirSync(dir)
    .filter((name) => name.endsWith('-request.json'))
    .map((name) => ({ name, body: JSON.parse(readFileSync(join(dir, name), 'utf8')).body as Record<string, any> }));
}
