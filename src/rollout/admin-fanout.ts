/**
 * Weight-sync fan-out: the rollout server forwards a trainer's pause / resume / policy_version call to the proxy admin
 * endpoints of every registered gateway node (`POST {node}/admin/inference/pause|resume`, `POST
 * {node}/admin/policy_version`, see src/proxy/app.ts), concurrently, each with a timeout, so a trainer needs one call
 * per step instead of knowing the nodes.
 *
 * - `POST /rollout/admin/inference/pause {timeout_s?: number}` → every node holds new model calls and answers once its
 *   in-flight calls drained (`drained_in_flight`).
 * - `POST /rollout/admin/inference/resume {timeout_s?}`
 * - `POST /rollout/admin/policy_version {policy_version: string | number, timeout_s?}`
 *
 * Answer: `{ok, nodes: [{node_id, url, ok, status, body | error}]}`: 200 when every node answered 2xx, else 502 with
 * the same body (a node that failed is named; the others stay paused/resumed as they answered). Draining nodes are
 * included (they still run sessions). Requests need the control-plane token like every rollout route.
 */

export interface FanoutNode {
  node_id: string;
  url: string;
}

export interface FanoutOptions {
  /** The nodes to reach (the server's registered nodes). */
  nodes: () => readonly FanoutNode[];
  /** Sent as `authorization: Bearer …` to the nodes when set. */
  controlPlaneToken: string | null;
  /** Default per-node timeout in seconds (default 60: a pause waits for in-flight model calls to finish). */
  defaultTimeoutS?: number;
  fetch?: typeof fetch;
}

/** A 400 the route wrapper turns into `{error}` (message starts with "invalid "). */
function invalid(message: string): Error {
  return new Error(`invalid request: ${message}`);
}

function parseBody(raw: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (raw === null || raw === undefined) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw invalid('body must be a JSON object');
  const body = raw as Record<string, unknown>;
  for (const key of Object.keys(body)) if (!allowed.includes(key)) throw invalid(`${key}: unknown field (allowed: ${allowed.join(', ')})`);
  if (body.timeout_s !== undefined && (typeof body.timeout_s !== 'number' || !(body.timeout_s > 0))) throw invalid('timeout_s must be a number > 0');
  return body;
}

/** Call `path` on every node; the combined answer. */
export async function fanOut(opts: FanoutOptions, path: string, payload: unknown, timeoutS: number): Promise<Response> {
  const doFetch = opts.fetch ?? fetch;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.controlPlaneToken) headers.authorization = `Bearer ${opts.controlPlaneToken}`;
  const nodes = opts.nodes();
  const results = await Promise.all(
    nodes.map(async (node) => {
      const url = `${node.url.replace(/\/+$/, '')}${path}`;
      try {
        const response = await doFetch(url, { method: 'POST', headers, body: JSON.stringify(payload), signal: AbortSignal.timeout(timeoutS * 1000) });
        const text = await response.text();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // keep the text
        }
        return { node_id: node.node_id, url: node.url, ok: response.ok, status: response.status, body };
      } catch (error) {
        const message = error instanceof Error && error.name === 'TimeoutError' ? `no answer within ${timeoutS} s` : error instanceof Error ? error.message : String(error);
        return { node_id: node.node_id, url: node.url, ok: false, status: null, error: message };
      }
    }),
  );
  const ok = results.every((r) => r.ok);
  return Response.json({ ok, nodes: results }, { status: ok ? 200 : 502 });
}

/**
 * The three routes, for Bun.serve's `routes`, wrapped by the server's `guard` (auth + error shape).
 * `readBody` parses the JSON body (the server's own, so bad JSON answers as on every route).
 */
export function adminFanoutRoutes<R extends Request>(
  opts: FanoutOptions,
  guard: (handler: (req: R) => unknown | Promise<unknown>) => (req: R) => Promise<Response>,
  readBody: (body: { json(): Promise<unknown> }) => Promise<unknown>,
) {
  const defaultTimeout = opts.defaultTimeoutS ?? 60;
  // The body is optional: none at all (no content-length, e.g. `curl -X POST`) or an empty one means the defaults.
  // Read once; what is there is parsed by the server's own reader (bad JSON answers as on every route).
  const bodyOf = async (req: Request) => {
    const text = await req.text();
    return text.trim() === '' ? null : await readBody(new Response(text));
  };
  return {
    '/rollout/admin/inference/pause': {
      POST: guard(async (req) => {
        const body = parseBody(await bodyOf(req), ['timeout_s']);
        const timeoutS = (body.timeout_s as number | undefined) ?? defaultTimeout;
        // A gateway that bounds its own drain wait (`?timeout_seconds=`, as the Python Polar's does) is told the same bound.
        return fanOut(opts, `/admin/inference/pause?timeout_seconds=${timeoutS}`, {}, timeoutS + 5);
      }),
    },
    '/rollout/admin/inference/resume': {
      POST: guard(async (req) => {
        const body = parseBody(await bodyOf(req), ['timeout_s']);
        return fanOut(opts, '/admin/inference/resume', {}, (body.timeout_s as number | undefined) ?? defaultTimeout);
      }),
    },
    '/rollout/admin/policy_version': {
      POST: guard(async (req) => {
        const body = parseBody(await bodyOf(req), ['policy_version', 'timeout_s']);
        const version = body.policy_version;
        if (typeof version !== 'string' && typeof version !== 'number') throw invalid('policy_version must be a string or a number');
        return fanOut(opts, '/admin/policy_version', { policy_version: String(version) }, (body.timeout_s as number | undefined) ?? defaultTimeout);
      }),
    },
  };
}
