/**
 * `proxy`: the capturing proxy inside every gateway node (`polar serve`, `polar gateway`; mapped to src/proxy/types.ts
 * `ProxyOptions` by `proxyOptionsFromConfig`). The standalone `polar proxy` takes the same settings as flags.
 */
import { z } from 'zod';

/** The `proxy` section. */
export const proxySchema = z
  .strictObject({
    /** Drop the per-request billing header Claude Code puts in its system prompt, so prefixes stay stable. */
    strip_billing_header: z.boolean().default(true).describe('Remove the per-request billing header line that Claude Code adds to its system prompt, so prompt prefixes stay mergeable.'),
    /** Chat mode: restore reasoning a harness dropped from its history, from the session's own answers. */
    restore_reasoning: z.boolean().default(false).describe("Chat mode: before the engine renders a request, put back the reasoning a harness dropped from earlier assistant turns (e.g. Gemini CLI strips thought parts), taken from this session's own earlier answers, so the engine sees the tokens it sampled. No effect in token mode."),
    /** Interval of synthetic keep-alive events while the engine works, in ms. */
    keepalive_interval_ms: z.number().int().positive().default(5000).describe('Interval between keep-alive events on a streaming response while the engine works, in ms. A streamed Anthropic or Responses reply also holds its HTTP status this long for the engine to answer, so an engine error within it is a real status.'),
    /** Largest request body accepted, in bytes; a larger one gets 413 in the caller's provider shape. */
    max_body_bytes: z
      .number()
      .int()
      .positive()
      // Bun.serve's own limit (maxRequestBodySize, 128 MiB by default) answers first above this, without the caller's shape.
      .max(128 * 1024 * 1024)
      .default(64 * 1024 * 1024)
      .describe("Largest request body the proxy accepts, in bytes (default 64 MiB, at most 128 MiB); a larger one is answered 413 in the caller's provider error shape."),
  })
  .describe('The proxy inside every gateway node that captures token ids and logprobs of every model call (`polar proxy` takes these as flags).');

export type ProxyConfig = z.output<typeof proxySchema>;
