/** The harness adapter registry: names as TaskRequest.agent.harness spells them. */
import { claudeCodeAdapter } from './claude-code.ts';
import { clineAdapter } from './cline.ts';
import { codexAdapter } from './codex.ts';
import { continueAdapter } from './continue.ts';
import { customAdapter } from './custom.ts';
import { geminiCliAdapter } from './gemini-cli.ts';
import { kiloAdapter } from './kilo.ts';
import { openclawAdapter } from './openclaw.ts';
import { opencodeAdapter } from './opencode.ts';
import { piAdapter } from './pi.ts';
import { qwenCodeAdapter } from './qwen-code.ts';
import { shellAdapter } from './shell.ts';
import type { HarnessAdapter } from './types.ts';

export const HARNESS_ADAPTERS: Readonly<Record<string, HarnessAdapter>> = {
  shell: shellAdapter,
  custom: customAdapter,
  pi: piAdapter,
  claude_code: claudeCodeAdapter,
  codex: codexAdapter,
  qwen_code: qwenCodeAdapter,
  gemini_cli: geminiCliAdapter,
  opencode: opencodeAdapter,
  kilo: kiloAdapter,
  continue: continueAdapter,
  cline: clineAdapter,
  openclaw: openclawAdapter,
};

/** The adapter for a name (aliases: claude-code, gemini-cli, qwen-code). Throws Error listing the known names. */
export function getHarnessAdapter(name: string): HarnessAdapter {
  const adapter = HARNESS_ADAPTERS[name.replaceAll('-', '_')];
  if (!adapter) throw new Error(`unknown harness ${JSON.stringify(name)}; known: ${Object.keys(HARNESS_ADAPTERS).join(', ')}`);
  return adapter;
}

export type { HarnessAdapter, HarnessContext, HarnessLaunch, HarnessOutcome } from './types.ts';
