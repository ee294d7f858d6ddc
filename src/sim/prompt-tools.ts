/**
 * The tool definitions a chat template rendered into a prompt, read back from its text, so the simulator can call a
 * shell tool of a prompt it got as token ids only. Two renderings are understood: JSON tool objects
 * (`{"type": "function", "function": {...}}`, Qwen3's `<tools>` block, Llama 3.1's `tojson(indent=4)`) and the
 * TypeScript declarations of gpt-oss (`type NAME = (_: {\n// doc\nparam?: string,\n}) => any;`,
 * https://cookbook.openai.com/articles/openai-harmony#function-calling). Templates that do not render tools
 * (DeepSeek-V3.1, Gemma 3) yield none.
 */
import type { ChatTool } from '../tokenization/chat-messages.ts';
import { jsonObjectEnd } from '../tokenization/family-parsers.ts';

const JSON_TOOL_START = /\{\s*"type"\s*:\s*"function"/g;
const TS_TOOL = /(?:^|\n)type (\w+) = \(_: \{\n([\s\S]*?)\}\) => any;/g;
const TS_PARAM = /^(\w+)(\?)?: ([^,/]+?)(?:,|$)/;

function tsType(type: string): string {
  const t = type.trim();
  if (t.endsWith('[]')) return 'array';
  if (t === 'number') return 'number';
  if (t === 'boolean') return 'boolean';
  if (t === 'object') return 'object';
  return 'string';
}

/** Tools found in rendered prompt text, in order of appearance (duplicates by name dropped). */
export function toolsFromPromptText(text: string): ChatTool[] {
  const tools: ChatTool[] = [];
  const seen = new Set<string>();
  const add = (tool: ChatTool) => {
    if (seen.has(tool.function.name)) return;
    seen.add(tool.function.name);
    tools.push(tool);
  };
  for (const match of text.matchAll(JSON_TOOL_START)) {
    const end = jsonObjectEnd(text, match.index);
    if (end < 0) continue;
    try {
      const tool = JSON.parse(text.slice(match.index, end)) as ChatTool;
      if (tool && typeof tool.function?.name === 'string') add(tool);
    } catch {
      // Not a tool object after all.
    }
  }
  for (const match of text.matchAll(TS_TOOL)) {
    const properties: Record<string, { type: string }> = {};
    const required: string[] = [];
    for (const line of match[2]!.split('\n')) {
      const param = TS_PARAM.exec(line.trim());
      if (!param || line.trim().startsWith('//')) continue;
      properties[param[1]!] = { type: tsType(param[3]!) };
      if (!param[2]) required.push(param[1]!);
    }
    add({ type: 'function', function: { name: match[1]!, parameters: { type: 'object', properties, required } } });
  }
  return tools;
}
