/**
 * Guided decoding in the simulator: a request that asks for JSON (vLLM / SGLang / llama.cpp chat `response_format`,
 * vLLM completions `response_format` or `structured_outputs.json`, SGLang `sampling_params.json_schema`, llama.cpp
 * `json_schema`) is answered with a JSON value that validates against the schema, as a grammar-constrained engine
 * would, instead of the behaviour script's prose. A client that asks for JSON and gets prose retries (Gemini CLI's
 * loop-detection check retries the same prompt with back-off), so this keeps long sessions on time.
 * Sources: https://docs.vllm.ai/en/latest/features/structured_outputs.html,
 * https://docs.sglang.ai/advanced_features/structured_outputs.html,
 * https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
 */
import { SimHttpError, type Body } from './request.ts';

type Schema = Record<string, unknown>;

const isObject = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The schema of an OpenAI-style `response_format` (`json_object` = any object); null for text / absent. */
function fromResponseFormat(value: unknown, where: string): Schema | null {
  if (value === undefined || value === null) return null;
  if (!isObject(value)) throw new SimHttpError(400, `${where} must be an object`);
  if (value.type === 'text') return null;
  if (value.type === 'json_object') return { type: 'object' };
  if (value.type === 'json_schema') {
    const spec = value.json_schema;
    if (!isObject(spec)) throw new SimHttpError(400, `${where}.json_schema is required for type "json_schema"`);
    const schema = spec.schema ?? spec.json_schema;
    if (schema === undefined) return { type: 'object' };
    if (!isObject(schema)) throw new SimHttpError(400, `${where}.json_schema.schema must be an object`);
    return schema;
  }
  throw new SimHttpError(400, `${where}.type must be "text", "json_object" or "json_schema"`);
}

function parsedSchema(value: unknown, where: string): Schema {
  let schema = value;
  if (typeof value === 'string') {
    try {
      schema = JSON.parse(value);
    } catch {
      throw new SimHttpError(400, `${where} is not valid JSON`);
    }
  }
  if (!isObject(schema)) throw new SimHttpError(400, `${where} must be a JSON Schema object`);
  return schema;
}

/** Chat completions (vLLM, SGLang) and vLLM completions: `response_format`, or vLLM's `structured_outputs.json`. */
export function guidedSchemaOfOpenAiBody(body: Body): Schema | null {
  const format = fromResponseFormat(body.response_format, 'response_format');
  if (format) return format;
  const structured = body.structured_outputs;
  if (isObject(structured) && structured.json !== undefined) return parsedSchema(structured.json, 'structured_outputs.json');
  return null;
}

/** SGLang `/generate`: `sampling_params.json_schema` (a JSON string). */
export function guidedSchemaOfSglang(sampling: Body): Schema | null {
  return sampling.json_schema === undefined || sampling.json_schema === null ? null : parsedSchema(sampling.json_schema, 'sampling_params.json_schema');
}

/** llama.cpp `/completion`: `json_schema` (an object). */
export function guidedSchemaOfLlamaCpp(body: Body): Schema | null {
  return body.json_schema === undefined || body.json_schema === null ? null : parsedSchema(body.json_schema, 'json_schema');
}

function resolveRef(root: Schema, ref: string): Schema {
  if (!ref.startsWith('#/')) return {};
  let node: unknown = root;
  for (const part of ref.slice(2).split('/')) node = isObject(node) ? node[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  return isObject(node) ? node : {};
}

function typeOf(schema: Schema): string | undefined {
  const type = schema.type;
  if (Array.isArray(type)) return (type.find((t) => t !== 'null') ?? type[0]) as string | undefined;
  if (typeof type === 'string') return type;
  if (isObject(schema.properties)) return 'object';
  if (schema.items !== undefined) return 'array';
  return undefined;
}

function numberFor(schema: Schema, integer: boolean): number {
  const min = typeof schema.minimum === 'number' ? schema.minimum : typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + (integer ? 1 : 1e-3) : undefined;
  const max = typeof schema.maximum === 'number' ? schema.maximum : typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - (integer ? 1 : 1e-3) : undefined;
  let value = min ?? (max !== undefined && max < 0 ? max : 0);
  if (integer) value = Math.ceil(value);
  return value;
}

function stringFor(schema: Schema): string {
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
  switch (schema.format) {
    case 'date-time':
      return '2026-01-01T00:00:00Z';
    case 'date':
      return '2026-01-01';
    case 'uuid':
      return '00000000-0000-4000-8000-000000000000';
    default:
      break;
  }
  let text = 'ok';
  while (text.length < min) text += ' ok';
  return text.slice(0, Math.max(min, Math.min(max, text.length)));
}

/**
 * A JSON value valid for `schema`: `const`, the first `enum` value, the first `anyOf`/`oneOf` branch, `allOf` merged,
 * local `$ref`s resolved; objects get every listed property, arrays `max(minItems, 1)` items (within `maxItems`),
 * numbers the lower bound (or 0), strings a short text within the length bounds. Deterministic; `pattern` is not
 * honoured. Depth is capped at 32 (deeper nodes are null).
 */
export function jsonForSchema(schema: Schema, root: Schema = schema, depth = 0): unknown {
  if (depth > 32) return null;
  if (typeof schema.$ref === 'string') return jsonForSchema({ ...resolveRef(root, schema.$ref), ...omit(schema, '$ref') }, root, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = schema[key];
    if (Array.isArray(branches) && branches.length > 0 && isObject(branches[0])) {
      const nonNull = branches.find((b) => isObject(b) && b.type !== 'null') ?? branches[0];
      return jsonForSchema({ ...omit(schema, key), ...(nonNull as Schema) }, root, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf)) {
    let merged: Schema = omit(schema, 'allOf');
    for (const part of schema.allOf) {
      if (!isObject(part)) continue;
      const properties = { ...(isObject(merged.properties) ? merged.properties : {}), ...(isObject(part.properties) ? part.properties : {}) };
      const required = [...(Array.isArray(merged.required) ? merged.required : []), ...(Array.isArray(part.required) ? part.required : [])];
      merged = { ...merged, ...part, properties, required };
    }
    return jsonForSchema(merged, root, depth + 1);
  }
  switch (typeOf(schema)) {
    case 'object': {
      const out: Record<string, unknown> = {};
      const properties = isObject(schema.properties) ? schema.properties : {};
      for (const [name, sub] of Object.entries(properties)) out[name] = jsonForSchema(isObject(sub) ? sub : {}, root, depth + 1);
      return out;
    }
    case 'array': {
      const min = typeof schema.minItems === 'number' ? schema.minItems : 0;
      const max = typeof schema.maxItems === 'number' ? schema.maxItems : Infinity;
      const count = Math.min(Math.max(min, 1), max);
      const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
      const items = isObject(schema.items) ? schema.items : {};
      return Array.from({ length: count }, (_, i) => jsonForSchema(isObject(prefix[i]) ? (prefix[i] as Schema) : items, root, depth + 1));
    }
    case 'string':
      return stringFor(schema);
    case 'integer':
      return numberFor(schema, true);
    case 'number':
      return numberFor(schema, false);
    case 'boolean':
      return false;
    case 'null':
      return null;
    default:
      return {};
  }
}

function omit(schema: Schema, key: string): Schema {
  const { [key]: _drop, ...rest } = schema;
  return rest;
}
