/**
 * The built-in simulator (`polar sim`), spoken to through its vLLM contract, so the simulator exercises exactly the
 * vLLM capture path. `engine_id` is `sim@<url>`: records with that prefix can be re-scored by `src/sim/policy.ts`.
 * Source: docs/architecture.md#the-simulator.
 */
import { ChatModeEngine, type ChatEngineOptions, type ChatEngineProfile } from './chat-engine.ts';
import { vllmProfile } from './vllm.ts';

export const simProfile: ChatEngineProfile = { ...vllmProfile, kind: 'sim', probeVersion: false };

/** A simulator client (`engine_id` `sim@<url>`). */
export function createSimEngine(opts: ChatEngineOptions): ChatModeEngine {
  return new ChatModeEngine(simProfile, { ...opts, idPrefix: 'sim' });
}
