/**
 * A minimal agent for the `shell` harness in tests (not a test file): OpenAI Chat against the gateway with the session
 * key, a `bash` tool whose calls it really runs in its work directory, until the model answers without a tool call.
 * Usage: bun test/support/run-shell-agent.ts "<instruction>" (env: OPENAI_BASE_URL, OPENAI_API_KEY, POLAR_MODEL).
 */
export {};

const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
if (!base || !key) {
  console.error('run-shell-agent: OPENAI_BASE_URL and OPENAI_API_KEY are required');
  process.exit(2);
}
const tools = [{
  type: 'function',
  function: { name: 'bash', description: 'Run a shell command in the repository', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
}];
type Message = { role: string; content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[]; tool_call_id?: string };
const messages: Message[] = [{ role: 'system', content: 'You are a coding agent. Use the bash tool.' }, { role: 'user', content: process.argv[2] ?? '' }];
for (let turn = 0; turn < 12; turn++) {
  const response = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: process.env.POLAR_MODEL ?? 'polar-sim', messages, tools, max_tokens: 1024 }),
  });
  if (!response.ok) {
    console.error(`run-shell-agent: HTTP ${response.status} ${await response.text()}`);
    process.exit(1);
  }
  const body = (await response.json()) as { choices: { message: Message }[] };
  const message = body.choices[0]!.message;
  messages.push({ role: 'assistant', content: message.content ?? null, ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}) });
  if (!message.tool_calls?.length) {
    console.log(message.content ?? '');
    process.exit(0);
  }
  for (const call of message.tool_calls) {
    const { command } = JSON.parse(call.function.arguments) as { command: string };
    const run = Bun.spawnSync(['sh', '-c', command], { stdout: 'pipe', stderr: 'pipe' });
    const output = `${run.stdout.toString()}${run.stderr.toString()}exit code: ${run.exitCode}`;
    messages.push({ role: 'tool', tool_call_id: call.id, content: output });
  }
}
console.error('run-shell-agent: no final answer after 12 turns');
process.exit(1);
