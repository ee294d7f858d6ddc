/** `proxy`: the gateway proxy at the model API boundary (`polar proxy`, and inside every gateway node). docs/architecture.md#the-proxy. */
import { z } from 'zod';

/** The `proxy` section. */
export const proxySchema = z
  .strictObject({
    /** Listen address; loopback by default because the session id is the only credential. */
    host: z.string().min(1).default('127.0.0.1').describe('Listen address of the standalone proxy (`polar proxy`).'),
    /** Listen port; 0 picks a free one. */
    port: z.number().int().min(0).max(65535).default(8080).describe('Listen port of the standalone proxy; 0 picks a free port.'),
    /** Drop the per-request billing header Claude Code puts in its system prompt, so prefixes stay stable. */
    strip_billing_header: z.boolean().default(true).describe('Remove the per-request billing header line that Claude Code adds to its system prompt, so prompt prefixes stay mergeable.'),
    /** Interval of synthetic keep-alive events while the engine works, in ms. */
    keepalive_interval_ms: z.number().int().positive().default(5000).describe('Interval between keep-alive events on a streaming response while the engine works, in ms.'),
    /** Largest request body accepted, in bytes; a larger one gets 413 in the caller's provider shape. */
    max_body_bytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024)
      .describe("Largest request body the proxy accepts, in bytes (default 64 MiB); a larger one is answered 413 in the caller's provider error shape."),
    /** SQLite file for captured completion records; null = `store.path`. */
    db: z.string().min(1).nullable().default(null).describe('SQLite file for captured completion records; null uses `store.path`.'),
  })
  .describe('The proxy that captures token ids and logprobs of every model call.');

export type ProxyConfig = z.output<typeof proxySchema>;
