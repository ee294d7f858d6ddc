/**
 * The topology file: one strict object per section, each defined in its own file under sections/ so that each area can
 * extend its section alone. Every field has a default and a description; docs/config.md is rendered from this schema.
 */
import { z } from 'zod';
import { engineSchema } from './sections/engine.ts';
import { addressClashes, gatewaySchema } from './sections/gateway.ts';
import { proxySchema } from './sections/proxy.ts';
import { rolloutSchema } from './sections/rollout.ts';
import { simSchema } from './sections/sim.ts';
import { storeSchema } from './sections/store.ts';

/** The whole config. `prefault({})` parses the empty object, so nested defaults are filled too. */
export const polarConfigSchema = z
  .strictObject({
    engine: engineSchema.prefault({}),
    proxy: proxySchema.prefault({}),
    sim: simSchema.prefault({}),
    gateway: gatewaySchema.prefault({}),
    rollout: rolloutSchema.prefault({}),
    store: storeSchema.prefault({}),
  })
  // Checks across sections (they run once every section is valid on its own).
  .superRefine((config, ctx) => {
    for (const issue of addressClashes(config.gateway, config.rollout)) ctx.addIssue({ code: 'custom', ...issue });
  })
  .describe('Polar topology file');

/** The resolved config: every field present, defaults filled, secrets taken from the environment where allowed. */
export type PolarConfig = z.output<typeof polarConfigSchema>;

/**
 * Secret fields: printed redacted, and filled from the named environment variable when the file leaves them null.
 * Paths are dot-separated keys into PolarConfig.
 */
export const SECRET_FIELDS: readonly { path: readonly [string, string]; env: string }[] = [
  { path: ['engine', 'api_key'], env: 'POLAR_ENGINE_API_KEY' },
  { path: ['rollout', 'control_plane_token'], env: 'POLAR_CONTROL_TOKEN' },
  // The Python Polar's name for the same token (ProRL-Agent-Server src/polar/rollout/server.py); the one above wins.
  { path: ['rollout', 'control_plane_token'], env: 'POLAR_CONTROL_PLANE_TOKEN' },
];

export type { EngineConfig } from './sections/engine.ts';
export type { ProxyConfig } from './sections/proxy.ts';
export type { SimConfig } from './sections/sim.ts';
export type { GatewayConfig, GatewayNodeConfig, RuntimeConfig } from './sections/gateway.ts';
export type { RolloutConfig } from './sections/rollout.ts';
export type { StoreConfig } from './sections/store.ts';
