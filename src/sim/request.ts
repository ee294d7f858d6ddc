/** Request parsing and error replies shared by the simulator's routes, in the engines' own error shape. */

/** An HTTP error in the engines' shape: `{error: {message, type, param, code}}`. */
export class SimHttpError extends Error {
  constructor(readonly status: number, message: string, readonly type = 'BadRequestError') {
    super(message);
  }
}

export const json = (body: unknown, status = 200) => Response.json(body, { status });
export const errorResponse = (error: SimHttpError) =>
  json({ error: { message: error.message, type: error.type, param: null, code: error.status } }, error.status);

export type Body = Record<string, unknown>;

export async function readBody(request: Request): Promise<Body> {
  let value: unknown;
  try {
    value = await request.json();
  } catch {
    throw new SimHttpError(400, 'request body is not valid JSON');
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new SimHttpError(400, 'request body must be a JSON object');
  return value as Body;
}

export function intField(body: Body, name: string, fallback: number, min = 0): number {
  const value = body[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) throw new SimHttpError(400, `${name} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  return value;
}

export function tokenIdsField(value: unknown, name: string): number[] | null {
  if (!Array.isArray(value)) return null;
  if (!value.every((x) => Number.isInteger(x) && x >= 0)) throw new SimHttpError(400, `${name} must be an array of non-negative token ids`);
  return value as number[];
}

export function stopList(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((s) => typeof s === 'string')) return value as string[];
  throw new SimHttpError(400, 'stop must be a string or an array of strings');
}

export const utf8 = new TextEncoder();

/**
 * The session a request belongs to: header `x-polar-session`, else SGLang's `rid` up to its first `:`
 * (so one session's requests can carry distinct rids), else "".
 */
export function sessionOf(request: Request, body: Body): string {
  const header = request.headers.get('x-polar-session');
  if (header) return header;
  if (typeof body.rid === 'string') return body.rid.split(':')[0]!;
  return '';
}


