/**
 * What every part of the proxy app shares: the dependencies with their defaults filled, the gate, the recorder, the
 * codec context, the dialect table, plus the helpers every route uses (session lookup, JSON body, decode, error
 * rendering). Built once per app by `createProxyRuntime` (app.ts).
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { systemClock, type Clock } from '../core/clock.ts';
import type { CodecContext, Dialect } from '../core/dialect.ts';
import { GatewayError, toGatewayError } from '../core/errors.ts';
import { extendRun, SplitRuns, type SplitOutputRun } from '../core/element-runs.ts';
import { timeOrderedId, type IdGenerator } from '../core/ids.ts';
import type { IRMessage, IRRequest, IRTool, Warning } from '../core/ir.ts';
import type { CompletionRecord } from '../core/records.ts';
import { dialectForPath, type DialectRoute } from './dialect-table.ts';
import { InferenceGate } from './inference-gate.ts';
import { ProxyMetrics } from '../observe/proxy-metrics.ts';
import { ReasoningMemory } from './reasoning-restore.ts';
import { Recorder } from './recorder.ts';
import { RequestJsonReader } from './request-json.ts';
import { sessionKeyOf } from './sessions.ts';
import { newProxyCounters, type ProxyCounters, type ProxyDeps, type ProxyOptions, type ProxySessionInfo } from './types.ts';

/** Hono environment of the proxy app: a handler records the dialect it serves, so errors render in that shape. */
export type Env = { Variables: { dialect: Dialect } };

export interface ProxyRuntime {
  deps: ProxyDeps;
  clock: Clock;
  newId: IdGenerator;
  options: ProxyOptions;
  counters: ProxyCounters;
  gate: InferenceGate;
  recorder: Recorder;
  codecCtx: CodecContext;
  routes: DialectRoute[];
  /** Prometheus metrics of this proxy (`GET /metrics`; merged into the gateway node's). */
  metrics: ProxyMetrics;
  /** Reasoning of the answers returned per session, when `options.restoreReasoning` is on in chat mode. */
  reasoning: ReasoningMemory | null;
  /** Request bodies per session, read as splices of the previous one (request-json.ts). */
  requests: RequestJsonReader;
}

export function createProxyRuntime(deps: ProxyDeps, routes: DialectRoute[]): ProxyRuntime {
  const clock = deps.clock ?? systemClock;
  const newId = deps.newId ?? timeOrderedId;
  const options = deps.options ?? {};
  const counters = deps.counters ?? newProxyCounters();
  const metrics = new ProxyMetrics(deps.engine.kind);
  const onRecord = (rec: CompletionRecord) => {
    metrics.observeRecord(rec);
    deps.onRecord?.(rec);
  };
  const gate = new InferenceGate(options.initialPolicyVersion ?? null);
  metrics.trackInferenceGate(gate);
  return {
    deps, clock, newId, options, counters, routes, metrics, gate,
    recorder: new Recorder(deps.store, deps.engine, clock, counters, onRecord),
    codecCtx: { now: clock, newId, options: options.dialectOptions },
    reasoning: options.restoreReasoning && deps.engine.mode === 'chat' ? new ReasoningMemory() : null,
    requests: new RequestJsonReader(),
  };
}

/** The dialect a handler chose, else the one owning the path prefix. */
export function errorDialect(rt: ProxyRuntime, c: Context<Env>): Dialect {
  return c.get('dialect') ?? dialectForPath(rt.routes, c.req.path);
}

/** The error in the dialect's shape and status; the engine's `Retry-After` is forwarded. */
export function renderError(c: Context<Env>, dialect: Dialect, error: GatewayError): Response {
  const { status, body } = dialect.encodeError(error);
  const retryAfter = error.details.upstream?.retryAfter;
  if (retryAfter) c.header('retry-after', retryAfter);
  return c.json(body as object, status as ContentfulStatusCode);
}

/** Header value: warning codes, comma-separated (ASCII only; the full messages are on the record). */
export function warningHeader(warnings: readonly Warning[]): string {
  return [...new Set(warnings.map((w) => w.code.replace(/[^\x20-\x7e]/g, '?')))].join(', ');
}

/** The caller's session (path prefix, `x-polar-session`, or API key), or a 401 in the caller's shape. */
export function resolveSession(rt: ProxyRuntime, c: Context<Env>): ProxySessionInfo {
  const key = sessionKeyOf(c.req.raw.headers, new URL(c.req.url), c.req.param('sid'));
  const info = rt.deps.sessions.resolve(key);
  if (!info) {
    rt.counters.rejected++;
    throw new GatewayError('authentication', key === '' ? 'no API key: this gateway needs the session key as the API key' : 'unknown session: the API key is not a live Polar session');
  }
  return info;
}

const lenientUtf8 = new TextDecoder('utf-8');
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The parsed body and, for the recorder, what it was as received: the UTF-8 bytes it was decoded from when they are
 * valid UTF-8 without a byte-order mark (the store keeps them as they are, so the ~200 KB UTF-16 text of a 100 KB body
 * need not stay alive while the engine answers), else the decoded text (invalid UTF-8 decoded with U+FFFD
 * replacements, as `Request.text()` does, and flagged `invalidUtf8` so the caller can warn). With `sessionId`, a valid UTF-8 body is read as a splice of the session's
 * previous one where its bytes repeat (request-json.ts: the same value as `JSON.parse`, sharing the previous body's
 * values, so bodies are never mutated).
 * @throws GatewayError 'invalid-request' (400 in the caller's shape) when the body is not JSON.
 */
export async function readJsonText(rt: ProxyRuntime, c: Context<Env>, sessionId: string | null = null): Promise<{ body: unknown; text?: string; bytes?: Uint8Array; invalidUtf8?: boolean }> {
  const malformed = (thrown: unknown) => {
    rt.counters.rejected++;
    return new GatewayError('invalid-request', `malformed JSON body: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  };
  const raw = new Uint8Array(await c.req.arrayBuffer());
  let invalidUtf8 = false;
  if (!(raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf)) {
    try {
      return { body: rt.requests.parse(raw, sessionId), bytes: raw };
    } catch (thrown) {
      if (thrown instanceof SyntaxError) throw malformed(thrown);
      // Invalid UTF-8 (the strict decoder's TypeError): decoded with replacements below.
      invalidUtf8 = true;
    }
  }
  // A byte-order mark (dropped from the text, so the bytes would not be the text's own) or invalid UTF-8.
  const text = lenientUtf8.decode(raw);
  if (!invalidUtf8 && text.includes('\uFFFD')) {
    try {
      strictUtf8.decode(raw);
    } catch {
      invalidUtf8 = true;
    }
  }
  try {
    return { body: JSON.parse(text) as unknown, text, ...(invalidUtf8 ? { invalidUtf8 } : {}) };
  } catch (thrown) {
    throw malformed(thrown);
  }
}

/** Decode a body with the route's dialect; the URL's stream flag and model (Gemini) win over the body's. */
export function decodeBody(rt: ProxyRuntime, route: DialectRoute, body: unknown, url: URL, fromUrl = route.fromUrl?.(url)): IRRequest {
  let ir: IRRequest;
  try {
    ir = route.dialect.decodeRequest(body, { ...rt.codecCtx, pathModel: fromUrl?.model, pathStream: fromUrl?.stream });
  } catch (thrown) {
    rt.counters.rejected++;
    const error = toGatewayError(thrown);
    // A codec that throws a plain Error on bad input still means the input was bad.
    throw error.kind === 'internal' ? new GatewayError('invalid-request', error.message.replace(/^unexpected gateway failure: /, ''), { cause: thrown }) : error;
  }
  if (fromUrl?.stream !== undefined) ir.stream = fromUrl.stream;
  if (fromUrl?.model !== undefined) ir.model = fromUrl.model;
  wellFormed(ir);
  return ir;
}

/**
 * Lone UTF-16 surrogates (typically in tool output: a tool that cut a string mid-character) are valid in JSON text
 * but not in UTF-8, and Python engines reject them, which fails every later turn of the session: each string of the
 * conversation is made well-formed (a lone surrogate becomes U+FFFD), with a `lone-surrogate-replaced` warning.
 * A message or tool that holds one is replaced in `ir` by a repaired copy; the decoded objects are never changed,
 * because a decoder may hand the same object to the session's next call (dialects/shared/decode-memo.ts). Each
 * object is scanned once: its copy and count are kept with it.
 * https://tc39.es/ecma262/#sec-string.prototype.towellformed
 */
export function wellFormed(ir: IRRequest): void {
  // System messages are repaired one by one: a dialect may build them afresh every call (Anthropic's top-level
  // `system`), which would end every run at its first element.
  const replaced = repairAll(ir.messages, repairedMessages, repairMessage, isSystem) + repairAll(ir.tools, repairedTools, repairTool, never);
  if (replaced > 0) ir.warnings.push({ code: 'lone-surrogate-replaced', message: `${replaced} string(s) held lone UTF-16 surrogates; each was replaced by U+FFFD before reaching the engine` });
}

/** An IR message or tool as wellFormed leaves it: itself or its repaired copy, and how many strings were repaired. */
interface Repair {
  value: object;
  count: number;
}

/** Each IR message or tool wellFormed has seen, by object. */
const repairs = new WeakMap<object, Repair>();

/**
 * One call's messages / tools after its leading system messages, with the repair of each (null for a system message,
 * repaired on its own), which of them a repair replaced, and how many strings those repairs fixed.
 */
interface RepairRun<T> extends SplitOutputRun<T, Repair> {
  /** Indices in `inputs` whose repair is a copy (not the element itself), ascending. */
  changed: readonly number[];
  /** Strings repaired over the non-system elements. */
  count: number;
}

/**
 * The last call's repairs by its first message after the system ones / first tool: a call that extends it reads only
 * its new elements (core/element-runs.ts).
 */
const repairedMessages = new SplitRuns<IRMessage, RepairRun<IRMessage>>();
const repairedTools = new SplitRuns<IRTool, RepairRun<IRTool>>();
const isSystem = (message: IRMessage) => message.role === 'system';
const never = () => false;

/**
 * Replace each element of `items` by its repair; returns how many strings were repaired in all. The elements `apart`
 * picks are looked up one by one and left out of the run.
 */
function repairAll<T extends object>(items: T[], runs: SplitRuns<T, RepairRun<T>>, repair: (item: T, fix: (text: string) => string) => T, apart: (item: T) => boolean): number {
  const { lead, tail, outputs, apartAt, continued } = extendRun(runs, items, apart, () => true, (item) => repaired(item, repair));
  const changed = continued !== undefined ? continued.changed.slice() : [];
  let count = continued?.count ?? 0;
  for (let i = continued?.inputs.length ?? 0; i < outputs.length; i++) {
    const entry = outputs[i]!;
    if (entry === null) continue;
    count += entry.count;
    if (entry.value !== tail[i]) changed.push(i);
  }
  runs.keep({ inputs: tail, apartAt, outputs, changed, count });
  // Only what differs from `items` is written: the apart elements' repairs and the replaced elements.
  let replaced = count;
  const place = (at: number) => {
    const entry = repaired(items[at]!, repair);
    items[at] = entry.value as T;
    replaced += entry.count;
  };
  for (let i = 0; i < lead; i++) place(i);
  for (const i of apartAt) place(lead + i);
  for (const i of changed) items[lead + i] = outputs[i]!.value as T;
  return replaced;
}

function repaired<T extends object>(item: T, repair: (item: T, fix: (text: string) => string) => T): Repair {
  const known = repairs.get(item);
  if (known !== undefined) return known;
  let count = 0;
  const fix = (text: string): string => {
    if (text.isWellFormed()) return text;
    count++;
    return text.toWellFormed();
  };
  const copy = repair(item, fix);
  const entry = { value: count === 0 ? item : copy, count };
  repairs.set(item, entry);
  return entry;
}

/** `message` with every text, reasoning text and tool-call argument string passed through `fix` (a new object). */
function repairMessage(message: IRMessage, fix: (text: string) => string): IRMessage {
  const content = message.content.map((part) => (part.type === 'text' ? { ...part, text: fix(part.text) } : part));
  if (message.role !== 'assistant') return { ...message, content };
  const copy: IRMessage = { ...message, content };
  if (message.reasoning) copy.reasoning = { ...message.reasoning, text: fix(message.reasoning.text) };
  if (message.toolCalls) copy.toolCalls = message.toolCalls.map((call) => ({ ...call, arguments: fix(call.arguments) }));
  return copy;
}

/** `tool` with its description passed through `fix` (a new object). */
function repairTool(tool: IRTool, fix: (text: string) => string): IRTool {
  return tool.description === undefined ? tool : { ...tool, description: fix(tool.description) };
}
