/**
 * Recorded requests of real harness CLIs (Claude Code, Codex, Gemini CLI, Qwen Code, OpenCode, pi on four APIs), scrubbed:
 * vendor prose is replaced by `<vendor text: N chars>`, every wire shape is kept. Layout:
 * `test/fixtures/harness-traffic/<harness>/<run>/NNN-request.json`. The `polar-run` runs (Cline, Continue, Kilo Code) are request
 * bodies as `polar run` stored them on the simulator (headers are not stored there, so they have none).
 */
import { join } from 'node:path';

export const HARNESS_TRAFFIC = join(import.meta.dir, '..', 'fixtures', 'harness-traffic');
