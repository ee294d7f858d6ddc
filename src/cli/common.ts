/** Shared CLI plumbing: exit codes (0 ok, 1 failed work, 2 bad usage) and the usage-error type. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** Parse a positive integer option, or throw UsageError naming the flag. */
export function parsePositiveInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
    return n;
  };
}

/** Parse a port (0 = pick a free one). */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`--port must be 0..65535, got ${JSON.stringify(value)}`);
  return n;
}
