/** Tool parameter schemas: what the chat template may see. */
import { isRecord } from './validate.ts';

/** The schema used when a client declares a tool without parameters. */
export const EMPTY_OBJECT_SCHEMA: Readonly<Record<string, unknown>> = Object.freeze({ type: 'object', properties: {} });

/**
 * A copy of a tool's JSON Schema without `$schema` (Claude Code sends the draft URL; templates would print it into every
 * prompt) and without `cache_control` at the top level. Nested keywords are kept as the client wrote them.
 * @param schema the client's schema; a non-object gives `{type: "object", properties: {}}`.
 */
export function cleanToolSchema(schema: unknown): Record<string, unknown> {
  if (!isRecord(schema)) return { ...EMPTY_OBJECT_SCHEMA };
  const { $schema: _schema, cache_control: _cache, ...rest } = schema;
  return rest;
}
