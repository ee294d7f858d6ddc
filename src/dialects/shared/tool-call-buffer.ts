/**
 * Buffers streamed tool calls until each one ends, for wire formats that must send a call whole (Anthropic sends the
 * complete input_json_delta before the block stop; Gemini sends one functionCall part per call). Pure; no I/O.
 */

/** A tool call being assembled from `tool-call-start` / `tool-call-delta` events. */
export interface BufferedToolCall {
  id: string;
  name: string;
  /** Raw argument text accumulated so far. */
  args: string;
}

export interface ToolCallBuffer {
  start(index: number, id: string, name: string): void;
  append(index: number, delta: string): void;
  /** Remove and return the call at `index` (undefined when it never started). */
  take(index: number): BufferedToolCall | undefined;
  /** Remove and return every unfinished call, in index order. */
  drain(): BufferedToolCall[];
}

export function createToolCallBuffer(): ToolCallBuffer {
  const calls = new Map<number, BufferedToolCall>();
  return {
    start: (index, id, name) => void calls.set(index, { id, name, args: '' }),
    append(index, delta) {
      const call = calls.get(index);
      if (call) call.args += delta;
    },
    take(index) {
      const call = calls.get(index);
      calls.delete(index);
      return call;
    },
    drain() {
      const out = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
      calls.clear();
      return out;
    },
  };
}
