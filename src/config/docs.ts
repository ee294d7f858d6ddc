/**
 * Renders docs/config.md from the schema, so the reference cannot drift from the code
 * (test/config/docs.test.ts compares the committed file; `polar config docs > docs/config.md` regenerates it).
 */
import { stringify } from 'yaml';
import { z } from 'zod';
import { resolveConfig } from './load.ts';
import { polarConfigSchema } from './schema.ts';

interface JsonSchema {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  pattern?: string;
  minItems?: number;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
}

const preamble = `# Polar configuration reference

<!-- Generated from src/config/sections/*.ts by \`polar config docs\`; do not edit by hand. -->

One topology file configures the serving commands (\`polar serve\`, \`polar rollout\`, \`polar gateway\`); \`polar proxy\`
and \`polar sim\` read no file and take the \`engine\`, \`proxy\` and \`sim\` settings as flags (\`--help\` lists them, with
their own defaults). Check a file with:

\`\`\`sh
polar config check /etc/polar/polar.yaml   # prints the resolved config (defaults filled, secrets redacted), exit 0
                                           # or prints each "path: message" on stderr, exit 2
\`\`\`

## Format

- YAML (\`.yaml\`, \`.yml\`) or JSON (\`.json\`); with another extension a file starting with \`{\` is read as JSON,
  anything else as YAML. An empty file means all defaults.
- Validation is strict: an unknown key is an error that names its full path, for example
  \`gateway.nodes[0].max_run_worker: unknown key; did you mean "max_run_workers"?\`. A repeated key is an error too.
- Every field has a default; leave out whatever you do not need to change.
- Relative paths resolve against the working directory of the process (the systemd unit in
  \`examples/systemd/polar-serve.service\` sets it to \`/var/lib/polar\`).

## Secrets and environment variables

- Any string value may contain \`\${NAME}\` references, replaced by the environment variable \`NAME\` before validation.
  An unset variable is an error naming the field; write \`$\${\` for a literal \`\${\`.
- The secret fields, when the file leaves them null (the default), are taken from these variables if they are set:

| Field | Environment variable |
| --- | --- |
| \`engine.api_key\` | \`POLAR_ENGINE_API_KEY\` |
| \`rollout.control_plane_token\` | \`POLAR_CONTROL_TOKEN\`, else \`POLAR_CONTROL_PLANE_TOKEN\` (the Python Polar's name) |

- \`polar config check\` and logs print secrets as \`<redacted>\`.
- Keep secrets out of the file: write \`api_key: \${VLLM_API_KEY}\` or leave the field out and set the variable (the
  systemd unit reads them from \`/etc/polar/polar.env\`).
`;

/** The Markdown reference for the whole schema (deterministic; ends with a newline). */
export function renderConfigDocs(): string {
  const root = z.toJSONSchema(polarConfigSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const parts: string[] = [preamble];
  for (const [name, section] of Object.entries(root.properties ?? {})) renderObject(parts, name, section, 2);
  const defaults = stringify(resolveConfig({}, { env: {} }), { lineWidth: 0 });
  parts.push(`## All defaults\n\nThe resolved config of an empty file:\n\n\`\`\`yaml\n${defaults}\`\`\`\n`);
  return parts.join('\n');
}

function renderObject(parts: string[], path: string, node: JsonSchema, depth: number): void {
  const object = node.type === 'array' ? node.items! : node;
  const heading = '#'.repeat(Math.min(depth, 4));
  const lines = [`${heading} \`${path}\``, ''];
  if (node.description) lines.push(node.description, '');
  if (node.type === 'array' && object.description) lines.push(`Each item: ${object.description}`, '');
  lines.push('| Key | Type | Default | Description |', '| --- | --- | --- | --- |');
  const nested: [string, JsonSchema][] = [];
  for (const [key, field] of Object.entries(object.properties ?? {})) {
    const isObject = field.type === 'object' || (field.type === 'array' && field.items?.type === 'object');
    const childPath = `${path}${node.type === 'array' ? '[]' : ''}.${key}`;
    if (isObject) nested.push([childPath, field]);
    const description = isObject ? `${field.description ?? ''} See \`${childPath}\`.`.trim() : (field.description ?? '');
    lines.push(`| \`${key}\` | ${code(typeOf(field))} | ${defaultOf(field, isObject)} | ${description.replaceAll('|', '\\|')} |`);
  }
  parts.push(`${lines.join('\n')}\n`);
  for (const [childPath, field] of nested) renderObject(parts, childPath, field, depth + 1);
}

function typeOf(field: JsonSchema): string {
  if (field.anyOf) {
    const options = field.anyOf.map((option) => (option.type === 'null' ? 'null' : typeOf(option)));
    return [...options.filter((o) => o !== 'null'), ...options.filter((o) => o === 'null')].join(' | ');
  }
  if (field.enum) return field.enum.map((v) => JSON.stringify(v)).join(' | ');
  const types = Array.isArray(field.type) ? field.type : field.type ? [field.type] : [];
  const base = types.filter((t) => t !== 'null');
  let text = base.map((t) => (t === 'string' && field.format === 'uri' ? 'url' : t === 'array' ? `${typeOf(field.items ?? {})}[]` : t)).join(' | ') || 'any';
  const bounds: string[] = [];
  // zod emits the safe-integer range for every int(); it is noise in a reference.
  if (field.minimum !== undefined && field.minimum > Number.MIN_SAFE_INTEGER) bounds.push(`≥ ${field.minimum}`);
  if (field.exclusiveMinimum !== undefined) bounds.push(`> ${field.exclusiveMinimum}`);
  if (field.maximum !== undefined && field.maximum < Number.MAX_SAFE_INTEGER) bounds.push(`≤ ${field.maximum}`);
  if (field.minItems !== undefined) bounds.push(`≥ ${field.minItems} items`);
  if (bounds.length > 0) text += ` (${bounds.join(', ')})`;
  if (types.includes('null')) text += ' | null';
  return text;
}

function defaultOf(field: JsonSchema, isObject: boolean): string {
  if (field.default === undefined) return '';
  if (isObject && field.type === 'object') return 'see section';
  if (isObject && Array.isArray(field.default)) return `${field.default.length} item(s), with the defaults of the section`;
  return code(JSON.stringify(field.default));
}

function code(text: string): string {
  return `\`${text.replaceAll('|', '\\|')}\``;
}
