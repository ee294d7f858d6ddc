/**
 * Checks shared by the end-to-end `polar run` tests: the run's one session completed as a tool loop.
 */
import { expect } from 'bun:test';
import { join } from 'node:path';
import type { CompletionRecord } from '../../src/core/records.ts';
import { openStore } from '../../src/store/index.ts';

/**
 * The one session of task `taskId` in `<dir>/results.db`: COMPLETED, harness success, ≥ 2 calls whose last sees a tool
 * result. Optional: the first call ended in tool calls (`firstCallToolCalls`, and with `shellTool` the one tool it
 * called), and every record was captured in `mode` without a capture error.
 * @returns the session's completion records in seq order.
 */
export function expectCompletedToolLoop(
  dir: string,
  taskId: string,
  opts: { firstCallToolCalls?: boolean; shellTool?: string; mode?: 'chat' | 'token' } = {},
): CompletionRecord[] {
  const store = openStore(join(dir, 'results.db'));
  try {
    const sessions = store.sessions.listByTask(taskId);
    expect(sessions).toHaveLength(1);
    const result = store.results.get(sessions[0]!.session_id);
    expect({ status: result?.status, error: result?.error }).toEqual({ status: 'COMPLETED', error: null });
    expect(result!.trajectory.metadata.harness_outcome).toMatchObject({ success: true });
    const records = store.completions.listBySession(sessions[0]!.session_id);
    expect(records.length).toBeGreaterThanOrEqual(2);
    if (opts.firstCallToolCalls) expect(records[0]!.finish_reason.unified).toBe('tool-calls');
    if (opts.shellTool !== undefined) expect(records[0]!.ir_response?.toolCalls.map((c) => c.name)).toEqual([opts.shellTool]);
    expect(records.at(-1)!.ir_request.messages.some((m) => m.role === 'tool')).toBe(true);
    if (opts.mode !== undefined) {
      for (const r of records) expect({ mode: r.mode, capture_error: r.capture_error }).toEqual({ mode: opts.mode, capture_error: null });
    }
    return records;
  } finally {
    store.close();
  }
}
