/**
 * `opencode` (opencode-ai, a Bun-compiled binary): a `polar` openai-compatible provider in the config file named by
 * OPENCODE_CONFIG; model list fetch off; its own HOME/XDG dirs; `@opencode-ai/plugin` (same version) pre-installed
 * into `$XDG_CONFIG_HOME/opencode` (linked from the harness install) so it never reaches for the registry.
 * `run --format json --title polar -- <words…>`: opencode joins its message words with one space and wraps a word that
 * holds a space in double quotes, so the instruction is split on single spaces only (newlines and tabs stay inside
 * words, runs of spaces become empty words): the join gives the exact instruction back. The `--` matters: without it
 * yargs reads words of the instruction such as `-m` or `-q` (as in "run `python3 -m unittest -q`") as options and
 * opencode prints its usage and exits 1 before any model call. `error` events or a non-zero exit mean failure.
 * Source: docs/protocol-notes.md#harness-clis; checked against opencode-ai 1.18.33 (the request body's user message is the exact text).
 */
import { jsonLines, type HarnessAdapter, type HarnessContext } from './types.ts';

const VERSION = '1.18.33';

/**
 * The instruction as opencode `run` message words: split on single spaces, so `words.join(' ')` (what opencode sends)
 * is the instruction exactly; no word holds a space, so opencode quotes none. Example: `'a  b\nc'` → `['a', '', 'b\nc']`.
 */
export function opencodeMessageWords(instruction: string): string[] {
  return instruction.split(' ');
}

/**
 * The OpenCode config (also read by its fork Kilo) that points the `polar` provider at the gateway's OpenAI Chat
 * endpoint (`@ai-sdk/openai-compatible`, API key from $POLAR_API_KEY) and makes it the only provider and the model,
 * with auto-update and share off. Source: https://opencode.ai/docs/config/ , https://opencode.ai/docs/providers/.
 */
export function opencodeProviderConfig(ctx: Pick<HarnessContext, 'modelName' | 'gatewayUrl'>) {
  return {
    model: `polar/${ctx.modelName}`,
    enabled_providers: ['polar'],
    autoupdate: false,
    share: 'disabled',
    provider: {
      polar: {
        npm: '@ai-sdk/openai-compatible',
        options: { baseURL: `${ctx.gatewayUrl}/v1`, apiKey: '{env:POLAR_API_KEY}' },
        models: { [ctx.modelName]: {} },
      },
    },
  };
}

/** XDG base directories (config, data, cache, state) under the session HOME, so the CLI keeps nothing outside it. */
export function sessionXdgDirs(home: string): Record<string, string> {
  return {
    XDG_CONFIG_HOME: `${home}/.config`,
    XDG_DATA_HOME: `${home}/.local/share`,
    XDG_CACHE_HOME: `${home}/.cache`,
    XDG_STATE_HOME: `${home}/.local/state`,
  };
}

export const opencodeAdapter: HarnessAdapter = {
  name: 'opencode',
  package: { name: 'opencode-ai', version: VERSION, bin: 'opencode', js: 'native', companions: [{ name: '@opencode-ai/plugin', version: VERSION }] },
  launch(ctx) {
    const xdgConfig = `${ctx.home}/.config`;
    const configPath = `${xdgConfig}/opencode/polar.json`;
    const config = opencodeProviderConfig(ctx);
    return {
      argv: [ctx.binPath ?? 'opencode', 'run', '--format', 'json', '--title', 'polar', '--', ...opencodeMessageWords(ctx.instruction)],
      env: {
        OPENCODE_CONFIG: configPath,
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        POLAR_API_KEY: ctx.sessionId,
        ...sessionXdgDirs(ctx.home),
      },
      files: [
        { path: configPath, content: `${JSON.stringify(config, null, 2)}\n` },
        { path: `${xdgConfig}/opencode/package.json`, content: `${JSON.stringify({ dependencies: { '@opencode-ai/plugin': VERSION } }, null, 2)}\n` },
      ],
      links: ctx.installDir ? [{ path: `${xdgConfig}/opencode/node_modules`, target: ctx.installDir }] : [],
    };
  },
  outcome(run) {
    const events = jsonLines(run.stdout);
    const error = events.find((e) => e.type === 'error');
    if (error) return { success: false, reason: `error event: ${JSON.stringify(error.error ?? error).slice(0, 200)}` };
    if (run.exitCode !== 0) return { success: false, reason: `exit ${run.exitCode}` };
    const finalText = events.filter((e) => e.type === 'text').map((e) => String((e.part as { text?: string } | undefined)?.text ?? '')).at(-1);
    if (!events.some((e) => e.type === 'step_finish')) return { success: false, reason: 'no step_finish event', finalText };
    return { success: true, reason: 'step_finish without error', finalText };
  },
};
