/**
 * `--engine-url` on `polar proxy`, `polar run`, `polar gateway` and `polar serve`: repeatable, and each value may hold
 * several comma-separated URLs. One URL is `engine.url`; two or more are replicas (`engine.urls`,
 * src/engines/replicas.ts: session affinity, least outstanding requests, health checks, one retry elsewhere).
 */
import { UsageError } from './common.ts';

/**
 * Commander collector: appends the URLs of one `--engine-url` value to the ones before.
 * @throws UsageError (exit 2) naming the value when a part is empty or not an http(s) URL.
 */
export function collectEngineUrls(value: string, previous: string[] | undefined): string[] {
  const parts = value.split(',').map((part) => part.trim());
  for (const part of parts) {
    let ok = false;
    try {
      ok = ['http:', 'https:'].includes(new URL(part).protocol);
    } catch {
      ok = false;
    }
    if (!ok) throw new UsageError(`--engine-url: ${JSON.stringify(part)} is not an http(s) URL (in ${JSON.stringify(value)}; separate replicas with commas or repeat the flag)`);
  }
  return [...(previous ?? []), ...parts];
}

/**
 * The engine's `url` and, for two or more, `urls` (replicas) from the collected `--engine-url` values.
 * @throws UsageError when a URL is listed twice.
 */
export function engineUrlFields(urls: readonly string[]): { url: string; urls: string[] } {
  const repeated = urls.find((u, i) => urls.indexOf(u) !== i);
  if (repeated !== undefined) throw new UsageError(`--engine-url: ${repeated} is given twice`);
  return { url: urls[0]!, urls: urls.length > 1 ? [...urls] : [] };
}
