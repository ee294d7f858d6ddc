/**
 * Dispatch under load (src/rollout/dispatcher.ts, node-client.ts): a pass keeps at most DISPATCH_CONCURRENCY requests
 * in flight per node, and a dispatch that timed out but reached the node is adopted, not re-queued to run twice.
 */
import { afterEach, expect, test } from 'bun:test';
import { DISPATCH_CONCURRENCY } from '../../src/rollout/dispatcher.ts';
import { httpNodeClient, type DispatchSpec } from '../../src/rollout/node-client.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore } from '../../src/store/index.ts';
import { taskRequest } from '../support/tasks.ts';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A node that answers each POST /sessions after `delayMs`, counting how many it holds open at once. */
function slowNode(delayMs: number) {
  const held = new Map<string, number>();
  let open = 0;
  let maxOpen = 0;
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    routes: {
      '/sessions': {
        POST: async (req) => {
          const spec = (await req.json()) as DispatchSpec;
          held.set(spec.session_id, spec.attempt ?? 0);
          open++;
          maxOpen = Math.max(maxOpen, open);
          await Bun.sleep(delayMs);
          open--;
          return Response.json({ session_id: spec.session_id, status: 'REGISTERED' }, { status: 202 });
        },
      },
      '/sessions/:id': {
        GET: (req) => (held.has(req.params.id) ? Response.json({ status: 'INITIALIZING', attempt: held.get(req.params.id) }) : new Response('', { status: 404 })),
      },
    },
  });
  cleanups.push(() => server.stop(true));
  return { url: `http://127.0.0.1:${server.port}`, held, maxOpen: () => maxOpen };
}

const spec = (id: string): DispatchSpec => ({ session_id: id, task: taskRequest('t'), sample_index: 0, callback_url: 'http://127.0.0.1:9/cb', attempt: 3 });

test('a dispatch that times out but reached the node is held there (its attempt adopted); one that never arrived is unavailable', async () => {
  const node = slowNode(400);
  const client = httpNodeClient(node.url, { timeoutMs: 100 });
  expect(await client.dispatch(spec('s-slow'))).toEqual({ kind: 'held', attempt: 3, status: 'INITIALIZING' });
  const gone = httpNodeClient('http://127.0.0.1:9', { timeoutMs: 100 });
  expect((await gone.dispatch(spec('s-gone'))).kind).toBe('unavailable');
});

test('a pass keeps at most DISPATCH_CONCURRENCY dispatch requests in flight per node', async () => {
  const node = slowNode(50);
  const store = openStore(':memory:');
  cleanups.push(() => store.close());
  const server = new RolloutServer({ store, tickMs: 60_000 }).start();
  cleanups.push(() => server.stop());
  const capacity = { init_workers: 4, ready_buffer: 40, max_run_workers: 1, postrun_workers: 1 }; // 41 before POSTRUN
  server.registerNode({ node_id: 'n1', url: node.url, capacity });
  server.submit({ ...taskRequest('burst'), num_samples: 3 * DISPATCH_CONCURRENCY });
  await server.pump();
  await server.pump();
  expect(node.held.size).toBe(3 * DISPATCH_CONCURRENCY);
  expect(node.maxOpen()).toBe(DISPATCH_CONCURRENCY);
  expect(store.sessions.countByStatus('INITIALIZING')).toBe(3 * DISPATCH_CONCURRENCY);
});
