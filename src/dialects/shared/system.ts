/** System-prompt placement shared by the OpenAI-style dialects. */
import type { IRContentPart, IRMessage, Warning } from '../../core/ir.ts';

/**
 * Merge every `system` message into ONE leading system message (Qwen chat templates reject a system message anywhere but
 * first; docs/protocol-notes.md#openai-chat). One system message keeps its parts; several are joined into one text part with a blank line
 * between them. A system message found after a non-system message adds a `system-message-moved` warning.
 * @returns a new array; the input is not modified.
 */
export function mergeSystemMessages(messages: readonly IRMessage[], warnings: Warning[]): IRMessage[] {
  const systems: IRContentPart[][] = [];
  const rest: IRMessage[] = [];
  let moved = false;
  for (const message of messages) {
    if (message.role === 'system') {
      if (rest.length > 0) moved = true;
      systems.push(message.content);
    } else rest.push(message);
  }
  if (systems.length === 0) return rest;
  if (moved) {
    warnings.push({
      code: 'system-message-moved',
      message: 'system/developer messages after the first turn were merged into the leading system message',
    });
  }
  const content: IRContentPart[] =
    systems.length === 1
      ? systems[0]!
      : [{ type: 'text', text: systems.map((parts) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('')).join('\n\n') }];
  return [{ role: 'system', content }, ...rest];
}
