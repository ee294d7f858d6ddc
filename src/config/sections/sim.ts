/** `sim`: the built-in inference simulator (`polar sim`). docs/architecture.md#the-simulator. */
import { z } from 'zod';

/** The `sim` section. */
export const simSchema = z
  .strictObject({
    /** Listen address. */
    host: z.string().min(1).default('127.0.0.1').describe('Listen address of the simulator.'),
    /** Listen port; 0 picks a free one. */
    port: z.number().int().min(0).max(65535).default(8000).describe('Listen port of the simulator; 0 picks a free port.'),
    /** Hugging Face model dir with tokenizer.json + chat template; null = the Qwen3 files embedded in the binary. */
    tokenizer: z.string().min(1).nullable().default(null).describe('Directory with tokenizer.json and tokenizer_config.json (or chat_template.jinja); null uses the Qwen3 tokenizer embedded in the binary.'),
    /** Directory of `<task_id>.yaml` behaviour scripts; null = only scripts registered over HTTP. */
    scripts: z.string().min(1).nullable().default(null).describe('Directory of behaviour scripts named `<task_id>.yaml`; null means scripts are only registered at run time.'),
    /** Prompt processing speed in tokens/s; 0 = instant. */
    prefill_tps: z.number().min(0).default(0).describe('Simulated prefill speed in prompt tokens per second for the whole engine (one FIFO prefill lane; cached prefix tokens are free); 0 answers without delay.'),
    /** Generation speed in tokens/s per request; 0 = instant. */
    decode_tps: z.number().min(0).default(0).describe('Simulated decode speed in tokens per second of a sequence decoding alone (one step = 1000 / decode_tps ms); 0 answers without delay.'),
    /** Requests served at once; the rest queue. */
    max_concurrency: z.number().int().positive().default(64).describe('Requests the simulator serves at once (its batch size); further requests wait.'),
    /** Continuous batching: ms a decode step grows per further running sequence. */
    decode_step_per_seq_ms: z.number().min(0).default(0).describe('Continuous batching: milliseconds a decode step grows for each further sequence in the batch (step = 1000 / decode_tps + this × (batch − 1)); 0 keeps decode speed independent of the batch.'),
  })
  .describe('The built-in inference simulator: real engine contracts, scripted behaviour, a deterministic toy policy. Read by `polar serve --with-sim`; `polar sim` takes these as flags, whose speed defaults are realistic (--prefill-tps 200000, --decode-tps 2000) where these answer at once.');

export type SimConfig = z.output<typeof simSchema>;
