/**
 * JSON text the way Python's `json.dumps(value, ensure_ascii=False)` writes it (separators `", "` and `": "`), which
 * is what vLLM's hermes tool parser and Qwen3's chat template (`tojson`) emit for tool-call arguments.
 * Source: https://docs.python.org/3/library/json.html#json.dumps
 */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? JSON.stringify(value) : value > 0 ? 'Infinity' : value < 0 ? '-Infinity' : 'NaN';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`;
  if (typeof value === 'object') {
    const parts: string[] = [];
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      if (item === undefined) continue;
      parts.push(`${JSON.stringify(key)}: ${pythonJsonDumps(item)}`);
    }
    return `{${parts.join(', ')}}`;
  }
  return JSON.stringify(String(value));
}
