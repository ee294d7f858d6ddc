/** Test helper: poll a condition, and POST JSON to a test server. */

/** Wait until `cond()` holds, checking every 5 ms. @throws Error after `ms` (default 3,000 ms). */
export async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await Bun.sleep(5);
  }
}

/** POST `body` as JSON (with `Authorization: Bearer token` when given); the status and the parsed JSON answer. */
export async function post(url: string, body: unknown, token?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
