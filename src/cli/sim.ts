/**
 * `polar sim`: run the inference simulator (docs/architecture.md#processes), and `polar sim score`: re-score a completion
 * with the toy policy (reads JSON `{prompt_ids, response_ids}` from a file or stdin, prints `{logprobs}`).
 */
import type { Command } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import { rescoreCompletion } from '../sim/policy.ts';
import { SimServer } from '../sim/server.ts';
import { parsePort, parsePositiveInt, UsageError } from './common.ts';

function parseNonNegative(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0 (0 = instant), got ${JSON.stringify(value)}`);
    return n;
  };
}

function tokenIds(value: unknown, name: string): number[] {
  if (!Array.isArray(value) || !value.every((x) => Number.isInteger(x) && x >= 0)) throw new UsageError(`${name} must be an array of non-negative token ids`);
  return value as number[];
}

/**
 * Re-score one completion given as JSON text `{prompt_ids: int[], response_ids: int[]}` (other fields ignored, so a
 * stored CompletionRecord works). Returns `{logprobs: number[]}` with one entry per response id.
 * @throws UsageError on malformed input.
 */
export function scoreCompletionJson(text: string): { logprobs: number[] } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`input is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (!value || typeof value !== 'object') throw new UsageError('input must be a JSON object {prompt_ids, response_ids}');
  const { prompt_ids, response_ids } = value as { prompt_ids?: unknown; response_ids?: unknown };
  return { logprobs: rescoreCompletion(tokenIds(prompt_ids, 'prompt_ids'), tokenIds(response_ids, 'response_ids')) };
}

interface SimFlags {
  port?: number;
  host: string;
  tokenizer?: string;
  scripts?: string;
  prefillTps: number;
  decodeTps: number;
  maxConcurrency: number;
  decodeStepPerSeqMs: number;
  maxModelLen?: number;
  servedModelName?: string;
  weightVersion: string;
}

export function register(program: Command): void {
  const sim = program
    .command('sim')
    .description('run the inference simulator: SGLang, vLLM and llama.cpp contracts, real tokenizer, scripted behaviour')
    .option('--port <port>', 'port to listen on (0 = any free port); required', parsePort)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--tokenizer <dir>', 'Hugging Face model directory (tokenizer.json, tokenizer_config.json); default: embedded Qwen3')
    .option('--scripts <dir>', 'directory of <task_id>.yaml behaviour scripts')
    .option('--prefill-tps <n>', 'prompt tokens per second for the whole engine, one FIFO prefill lane (0 = instant)', parseNonNegative('--prefill-tps'), 200_000)
    .option('--decode-tps <n>', 'generated tokens per second of a sequence decoding alone (0 = instant)', parseNonNegative('--decode-tps'), 2_000)
    .option('--max-concurrency <n>', 'sequences running at once; the rest queue', parsePositiveInt('--max-concurrency'), 64)
    .option('--decode-step-per-seq-ms <ms>', 'continuous batching: ms a decode step grows per further running sequence (0 = batch-independent decode)', parseNonNegative('--decode-step-per-seq-ms'), 0)
    .option('--max-model-len <n>', 'context length in tokens (default: the tokenizer config, else 131072)', parsePositiveInt('--max-model-len'))
    .option('--served-model-name <name>', 'model name on /v1/models')
    .option('--weight-version <v>', 'initial policy (weight) version', '0')
    .action(async (flags: SimFlags) => {
      // Not a requiredOption: commander would then demand it of `polar sim score` too.
      if (flags.port === undefined) throw new UsageError('polar sim needs --port (0 = any free port)');
      if (flags.tokenizer !== undefined && !existsSync(flags.tokenizer)) throw new UsageError(`--tokenizer ${flags.tokenizer} does not exist`);
      if (flags.scripts !== undefined && !existsSync(flags.scripts)) throw new UsageError(`--scripts ${flags.scripts} does not exist`);
      const server = await SimServer.start({
        port: flags.port,
        host: flags.host,
        tokenizerDir: flags.tokenizer,
        scriptsDir: flags.scripts,
        prefillTps: flags.prefillTps,
        decodeTps: flags.decodeTps,
        maxConcurrency: flags.maxConcurrency,
        decodeStepPerSeqMs: flags.decodeStepPerSeqMs,
        maxModelLen: flags.maxModelLen,
        servedModelName: flags.servedModelName,
        weightVersion: flags.weightVersion,
      });
      console.log(`polar sim: serving ${server.servedModelName} on ${server.url} (vLLM /v1, SGLang /generate, llama.cpp /completion)`);
      await new Promise<void>((resolve) => {
        const shutdown = () => {
          void server.stop().then(resolve);
        };
        process.once('SIGINT', shutdown);
        process.once('SIGTERM', shutdown);
      });
    });

  sim
    .command('score [file]')
    .description('re-score a completion: reads JSON {prompt_ids, response_ids} from FILE or stdin, prints {"logprobs": [...]}')
    .action(async (file: string | undefined) => {
      let text: string;
      if (file === undefined || file === '-') text = await Bun.stdin.text();
      else {
        if (!existsSync(file)) throw new UsageError(`${file} does not exist`);
        text = readFileSync(file, 'utf8');
      }
      console.log(JSON.stringify(scoreCompletionJson(text)));
    });
}
