/** Image references between data URLs (OpenAI) and {mediaType, data} (IR, Anthropic base64 sources). */
import type { IRContentPart } from '../../core/ir.ts';

/** Media type recorded for an image given only by URL (the proxy never fetches URLs, so the type is unknown). */
export const UNKNOWN_IMAGE_MEDIA_TYPE = 'image/*';

const DATA_URL = /^data:([^;,]+)?(?:;[^;,]*)*;base64,(.*)$/s;

/**
 * An image URL as an IR image part: a `data:<type>;base64,<data>` URL gives `{mediaType, data}`; any other URL gives
 * `{mediaType: "image/*", url}`.
 */
export function imagePartFromUrl(url: string): Extract<IRContentPart, { type: 'image' }> {
  const match = DATA_URL.exec(url);
  if (match) return { type: 'image', mediaType: match[1] ?? 'application/octet-stream', data: match[2] ?? '' };
  return { type: 'image', mediaType: UNKNOWN_IMAGE_MEDIA_TYPE, url };
}

/** An IR image part as a URL (a data URL when it carries bytes). */
export function imagePartToUrl(part: Extract<IRContentPart, { type: 'image' }>): string {
  if (part.data !== undefined) return `data:${part.mediaType};base64,${part.data}`;
  return part.url ?? '';
}
