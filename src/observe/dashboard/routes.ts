/**
 * The dashboard's routes on the rollout server (Bun.serve `routes`, https://bun.com/docs/api/http#routing):
 * `GET /` and `GET /dashboard` → the page (./page.html, embedded in the binary as text by `bun build --compile`);
 * `GET /dashboard/state` → DashboardState JSON; `GET /dashboard/session/{id}` → one session's row, result and reward
 * (404 JSON when unknown). The JSON routes go through the server's control-plane check (`guard`); the page is static.
 */
import pageHtml from './page.html' with { type: 'text' };
import { dashboardState, sessionView, type DashboardSource } from './state.ts';

/** The page's HTML text. */
export const DASHBOARD_HTML = pageHtml as unknown as string;

type Handler = (req: Request & { params: Record<string, string> }) => unknown | Promise<unknown>;

/** A node's `/health` document with a 1 s bound (null when it does not answer). */
export async function fetchNodeHealth(url: string, token: string | null): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/health`, { signal: AbortSignal.timeout(1000), headers: token ? { authorization: `Bearer ${token}` } : {} });
    return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Route table entries; `guard` wraps a handler with the server's token check and error mapping. */
export function dashboardRoutes(src: DashboardSource, guard: (h: Handler) => (req: Request & { params: Record<string, string> }) => Promise<Response>, now: () => number = Date.now) {
  const page = () => new Response(DASHBOARD_HTML, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' } });
  return {
    '/': { GET: page },
    '/dashboard': { GET: page },
    '/dashboard/state': { GET: guard(() => dashboardState(src, now())) },
    '/dashboard/session/:id': {
      GET: guard((req) => sessionView(src, decodeURIComponent(req.params.id!)) ?? Response.json({ error: `unknown session ${req.params.id}` }, { status: 404 })),
    },
  };
}

/**
 * The page as a standalone file showing one session (what `polar trace show --html FILE` writes): the session view
 * (`{session, result, reward, token_texts?}`) is embedded as `window.POLAR_SESSION`, so the page needs no server.
 */
export function sessionHtml(view: Record<string, unknown>): string {
  const data = JSON.stringify(view).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
  return DASHBOARD_HTML.replace('<script>\n', () => `<script>window.POLAR_SESSION = ${data};</script>\n<script>\n`);
}
