/**
 * Loading the topology file: parse YAML or JSON, expand `${ENV_NAME}` references, validate strictly, fill secrets from
 * the environment. Every problem is reported with the full path of the offending key, all at once.
 */
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { polarConfigSchema, SECRET_FIELDS, type PolarConfig } from './schema.ts';

/** One problem in a config file. `path` is e.g. `gateway.nodes[0].max_run_workers`; empty for the file as a whole. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** Thrown by loadConfig/resolveConfig; `issues` lists every problem found (never empty). */
export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly issues: ConfigIssue[]) {
    super(issues.map(formatIssue).join('\n'));
  }
}

/** `path: message`, or just the message for file-level problems. */
export function formatIssue(issue: ConfigIssue): string {
  return issue.path === '' ? issue.message : `${issue.path}: ${issue.message}`;
}

/** Environment used for `${NAME}` references and the secret fallbacks. */
export type ConfigEnv = Record<string, string | undefined>;

export interface ResolveOptions {
  /** Defaults to process.env; inject for tests. */
  env?: ConfigEnv;
}

/**
 * Read and resolve a topology file. The format is chosen by extension (`.json`, `.yaml`, `.yml`), otherwise by content
 * (a leading `{` means JSON). An empty file means all defaults.
 * @throws ConfigError when the file is unreadable, does not parse, or fails validation.
 */
export function loadConfig(path: string, options: ResolveOptions = {}): PolarConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new ConfigError([{ path: '', message: `cannot read config file ${path}: ${reason}` }]);
  }
  return resolveConfig(parseConfigText(text, path), options);
}

/**
 * Parse the text of a config file into plain data (no validation).
 * @param source file name; its extension picks the format.
 * @throws ConfigError with the line and column of a syntax error.
 */
export function parseConfigText(text: string, source = '<config>'): unknown {
  const ext = extname(source).toLowerCase();
  const asJson = ext === '.json' || (ext !== '.yaml' && ext !== '.yml' && text.trimStart().startsWith('{'));
  if (asJson) {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new ConfigError([{ path: '', message: `${source}: invalid JSON: ${(error as Error).message}` }]);
    }
  }
  try {
    // uniqueKeys (the default) makes a repeated key an error instead of silently keeping the last one.
    return parseYaml(text, { prettyErrors: true, uniqueKeys: true }) ?? {};
  } catch (error) {
    const detail = error instanceof YAMLParseError ? error.message.split('\n')[0] : (error as Error).message;
    throw new ConfigError([{ path: '', message: `${source}: invalid YAML: ${detail}` }]);
  }
}

/**
 * Validate already-parsed config data and fill every default.
 *
 * Secrets scheme (docs/config.md): any string value may hold `${NAME}` references, replaced by the environment variable
 * NAME (an unset variable is an error; `$${` writes a literal `${`). Then each secret field that is still null takes its
 * well-known variable (POLAR_ENGINE_API_KEY, POLAR_CONTROL_TOKEN) when that is set and non-empty.
 * @throws ConfigError listing every unknown key (with a "did you mean" hint), wrong type and failed constraint.
 */
export function resolveConfig(raw: unknown, options: ResolveOptions = {}): PolarConfig {
  const env = options.env ?? process.env;
  const issues: ConfigIssue[] = [];
  const expanded = expandEnvReferences(raw ?? {}, [], env, issues);
  const parsed = polarConfigSchema.safeParse(expanded);
  if (!parsed.success) issues.push(...parsed.error.issues.flatMap(toConfigIssues));
  if (issues.length > 0 || !parsed.success) throw new ConfigError(issues);
  const config = parsed.data;
  for (const { path, env: name } of SECRET_FIELDS) {
    const section = config[path[0] as keyof PolarConfig] as Record<string, unknown>;
    const fromEnv = env[name];
    if (section[path[1]] === null && fromEnv !== undefined && fromEnv !== '') section[path[1]] = fromEnv;
  }
  return config;
}

/** A deep copy of `config` with every set secret replaced by `<redacted>`, for printing and logs. */
export function redactConfig(config: PolarConfig): PolarConfig {
  const copy = structuredClone(config);
  for (const { path } of SECRET_FIELDS) {
    const section = copy[path[0] as keyof PolarConfig] as Record<string, unknown>;
    if (section[path[1]] !== null) section[path[1]] = '<redacted>';
  }
  return copy;
}

/** Render a zod/JSON path as `a.b[0].c`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (typeof part === 'string' && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(part)) out += out === '' ? part : `.${part}`;
    else out += `[${JSON.stringify(String(part))}]`;
  }
  return out;
}

const envReference = /\$\$\{|\$\{([^}]*)\}/g;

function expandEnvReferences(value: unknown, path: PropertyKey[], env: ConfigEnv, issues: ConfigIssue[]): unknown {
  if (typeof value === 'string') {
    return value.replace(envReference, (match, name: string | undefined) => {
      if (match === '$${') return '${';
      if (name === undefined || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        issues.push({ path: formatPath(path), message: `invalid environment reference ${match}; use \${NAME} (letters, digits, _)` });
        return match;
      }
      const resolved = env[name];
      if (resolved === undefined) {
        issues.push({ path: formatPath(path), message: `environment variable ${name} is not set` });
        return match;
      }
      return resolved;
    });
  }
  if (Array.isArray(value)) return value.map((item, index) => expandEnvReferences(item, [...path, index], env, issues));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = expandEnvReferences(item, [...path, key], env, issues);
    return out;
  }
  return value;
}

function toConfigIssues(issue: z.core.$ZodIssue): ConfigIssue[] {
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeysAt(issue.path);
    return issue.keys.map((key) => ({ path: formatPath([...issue.path, key]), message: unknownKeyMessage(key, known) }));
  }
  if (issue.code === 'invalid_type' && issue.path.length === 0) {
    return [{ path: '', message: 'the config must be a mapping of sections (engine, proxy, sim, gateway, rollout, store)' }];
  }
  return [{ path: formatPath(issue.path), message: issue.message }];
}

function unknownKeyMessage(key: string, known: string[]): string {
  if (known.length === 0) return 'unknown key';
  const close = closestKey(key, known);
  return close !== null ? `unknown key; did you mean "${close}"?` : `unknown key (known keys: ${known.join(', ')})`;
}

/** The known key with the smallest edit distance, when it is close enough to be a typo. */
export function closestKey(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  const allowed = Math.max(1, Math.floor(key.length / 3));
  return bestDistance <= allowed ? best : null;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

type JsonSchemaNode = { properties?: Record<string, JsonSchemaNode>; items?: JsonSchemaNode; anyOf?: JsonSchemaNode[] };
let inputJsonSchema: JsonSchemaNode | undefined;

/** Keys the schema allows in the object at `path` (walks the JSON Schema, which is simpler than zod internals). */
function knownKeysAt(path: readonly PropertyKey[]): string[] {
  inputJsonSchema ??= z.toJSONSchema(polarConfigSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchemaNode;
  let node: JsonSchemaNode | undefined = inputJsonSchema;
  for (const part of path) {
    node = node?.anyOf?.find((option) => option.properties !== undefined || option.items !== undefined) ?? node;
    node = typeof part === 'number' ? node?.items : node?.properties?.[String(part)];
  }
  return Object.keys(node?.properties ?? {});
}
