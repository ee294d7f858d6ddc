/**
 * Responses tools ↔ IR tools. Everything the model sees is a function (docs/protocol-notes.md#openai-responses):
 * - `function` → itself;
 * - `custom` (free text, e.g. Codex `apply_patch` with a lark grammar) → a function with one string parameter `input`;
 *   its calls go back to the client as `custom_tool_call` with that string as `input`;
 * - `namespace` → each member flattened to `<namespace>__<name>` (NAMESPACE_SEPARATOR); calls go back with the member's
 *   own name and `namespace`;
 * - hosted tools (`tool_search`, `web_search`, `file_search`, …) → dropped with a warning: nothing runs them locally.
 * Source: https://platform.openai.com/docs/guides/function-calling#custom-tools, openai-node `NamespaceTool`.
 */
import type { IRTool, IRToolChoice, IRToolOrigin, Warning } from '../../core/ir.ts';
import { cleanToolSchema } from '../shared/json-schema.ts';
import { tryParseJson } from '../shared/tool-input.ts';
import { isRecord, parseWire } from '../shared/validate.ts';
import { CustomToolSchema, FunctionToolSchema, NamespaceToolSchema, type ResponsesRequest } from './schema.ts';

/** Between a namespace and a member name in the flattened function name the model sees. */
export const NAMESPACE_SEPARATOR = '__';

/** The parameters of the function a `custom` tool is exposed as. */
export const CUSTOM_TOOL_PARAMETERS: Readonly<Record<string, unknown>> = Object.freeze({
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw free-text input of this tool (not JSON).' } },
  required: ['input'],
  additionalProperties: false,
});

type FunctionTool = ReturnType<typeof FunctionToolSchema.parse>;
type CustomTool = ReturnType<typeof CustomToolSchema.parse>;

function functionTool(tool: FunctionTool, origin: IRToolOrigin, name = tool.name): IRTool {
  return {
    name,
    ...(tool.description ? { description: tool.description } : {}),
    parameters: cleanToolSchema(tool.parameters),
    origin,
  };
}

function customTool(tool: CustomTool, namespace?: string): IRTool {
  // The model has no grammar-constrained decoding here, so the grammar goes into the description it reads.
  const format = tool.format ?? undefined;
  let description = tool.description ?? '';
  if (format?.type === 'grammar' && format.definition) {
    description += `${description ? '\n\n' : ''}The \`input\` argument must follow this ${format.syntax ?? ''} grammar:\n${format.definition}`;
  }
  return {
    name: namespace ? `${namespace}${NAMESPACE_SEPARATOR}${tool.name}` : tool.name,
    ...(description ? { description } : {}),
    parameters: structuredClone(CUSTOM_TOOL_PARAMETERS) as Record<string, unknown>,
    origin: {
      kind: 'custom',
      ...(namespace ? { namespace, originalName: tool.name } : {}),
      ...(format ? { extra: { format } } : {}),
    },
  };
}

/**
 * Wire `tools` → IR tools (functions only) plus warnings for dropped hosted tools.
 * @throws GatewayError('invalid-request') when a function/custom/namespace tool is malformed (names `tools[i]`).
 */
export function decodeTools(tools: ResponsesRequest['tools'], warnings: Warning[]): IRTool[] {
  const out: IRTool[] = [];
  (tools ?? []).forEach((raw, index) => {
    const where = `tools[${index}]`;
    switch (raw.type) {
      case 'function':
        out.push(functionTool(parseWire(FunctionToolSchema, raw, where), { kind: 'function' }));
        break;
      case 'custom':
        out.push(customTool(parseWire(CustomToolSchema, raw, where)));
        break;
      case 'namespace': {
        const ns = parseWire(NamespaceToolSchema, raw, where);
        for (const member of ns.tools) {
          if (member.type === 'custom') out.push(customTool(member, ns.name));
          else {
            const flat = `${ns.name}${NAMESPACE_SEPARATOR}${member.name}`;
            out.push(functionTool(member, { kind: 'namespace', namespace: ns.name, originalName: member.name }, flat));
          }
        }
        break;
      }
      default:
        warnings.push({
          code: 'tool-dropped',
          message: `${where}: tool type "${raw.type}" cannot run locally and was not shown to the model`,
        });
    }
  });
  return out;
}

/** Tool types the model is shown (as functions); any other type is a hosted tool that `decodeTools` drops. */
const SHOWN_TOOL_TYPES: ReadonlySet<string> = new Set(['function', 'custom', 'namespace']);

/**
 * The response object's `tools`: the request's tools the model was shown, exactly as the client sent them (hosted
 * tools were not shown, so they are not echoed). `sent` is the raw request `tools`, already validated by decodeRequest.
 */
export function echoTools(sent: unknown): unknown[] {
  return Array.isArray(sent) ? sent.filter((tool) => isRecord(tool) && typeof tool.type === 'string' && SHOWN_TOOL_TYPES.has(tool.type)) : [];
}

/**
 * The response object's `tool_choice`: the request's own when it was honoured (a mode, or a function / custom tool by
 * name, namespace included), else the mode it degraded to (`decodeToolChoice`); `auto` when none was sent.
 */
export function echoToolChoice(sent: unknown, decoded: IRToolChoice | undefined): unknown {
  if (sent == null) return 'auto';
  if (typeof sent === 'string') return sent;
  if (isRecord(sent) && (sent.type === 'function' || sent.type === 'custom') && typeof sent.name === 'string' && sent.name !== '') return sent;
  return encodeToolChoice(decoded) ?? 'auto';
}

/** IR tools → wire tools (namespace members regrouped under their namespace, in first-seen order). */
export function encodeTools(tools: readonly IRTool[]): unknown[] {
  const out: unknown[] = [];
  const namespaces = new Map<string, { type: 'namespace'; name: string; description: string; tools: unknown[] }>();
  for (const tool of tools) {
    const name = tool.origin.originalName ?? tool.name;
    const wire =
      tool.origin.kind === 'custom'
        ? { type: 'custom', name, ...(tool.description ? { description: tool.description } : {}), ...(tool.origin.extra?.format ? { format: tool.origin.extra.format } : {}) }
        : { type: 'function', name, ...(tool.description ? { description: tool.description } : {}), parameters: tool.parameters };
    const nsName = tool.origin.namespace;
    if (nsName === undefined) {
      out.push(wire);
      continue;
    }
    let ns = namespaces.get(nsName);
    if (!ns) {
      ns = { type: 'namespace', name: nsName, description: '', tools: [] };
      namespaces.set(nsName, ns);
      out.push(ns);
    }
    ns.tools.push(wire);
  }
  return out;
}

/**
 * Wire `tool_choice` → IR. `{type: "function"|"custom", name}` → `{name}` (flattened when it names a namespace member);
 * `allowed_tools` and hosted-tool choices degrade to their mode with a warning.
 */
export function decodeToolChoice(choice: ResponsesRequest['tool_choice'], warnings: Warning[]): IRToolChoice | undefined {
  if (choice == null) return undefined;
  if (typeof choice === 'string') return choice;
  if ((choice.type === 'function' || choice.type === 'custom') && choice.name) {
    const namespace = typeof choice.namespace === 'string' ? choice.namespace : undefined;
    return { name: namespace ? `${namespace}${NAMESPACE_SEPARATOR}${choice.name}` : choice.name };
  }
  if (choice.type === 'allowed_tools') {
    warnings.push({ code: 'tool-choice-degraded', message: 'tool_choice allowed_tools is not supported; all tools stay available' });
    return choice.mode === 'required' ? 'required' : 'auto';
  }
  warnings.push({ code: 'tool-choice-degraded', message: `tool_choice type "${choice.type}" is not supported; using auto` });
  return 'auto';
}

/** IR tool choice → wire. */
export function encodeToolChoice(choice: IRToolChoice | undefined): unknown {
  if (choice === undefined) return undefined;
  if (typeof choice === 'string') return choice;
  return { type: 'function', name: choice.name };
}

/** How a call the model made goes back to the client. */
export type CallTarget =
  | { kind: 'function'; name: string; namespace?: string }
  | { kind: 'custom'; name: string; namespace?: string };

/**
 * Find the client-side identity of a call to the flattened function `name`, using the request's tools (without them,
 * every call is a plain function call under its flattened name).
 */
export function resolveCallTarget(name: string, tools: readonly IRTool[] | undefined): CallTarget {
  const tool = tools?.find((t) => t.name === name);
  if (!tool) return { kind: 'function', name };
  const original = tool.origin.originalName ?? tool.name;
  const namespace = tool.origin.namespace;
  if (tool.origin.kind === 'custom') return { kind: 'custom', name: original, ...(namespace ? { namespace } : {}) };
  return { kind: 'function', name: original, ...(namespace ? { namespace } : {}) };
}

/**
 * A custom tool's free-text input from IR arguments `{"input": "..."}`. Arguments that are not such an object (the
 * model wrote the text bare) are passed through verbatim, so nothing is lost.
 */
export function customInputFromArguments(args: string): string {
  const parsed = tryParseJson(args);
  if (isRecord(parsed) && typeof parsed.input === 'string') return parsed.input;
  return args;
}

/** IR arguments for a custom tool call's free-text `input`. */
export function argumentsFromCustomInput(input: string): string {
  return JSON.stringify({ input });
}
