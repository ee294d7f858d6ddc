/**
 * Engine replica metrics (src/observe/replica-metrics.ts, on prom-client's default registry) appear in the `/metrics`
 * text of the proxy (src/observe/proxy-metrics.ts) and of the gateway node (src/observe/gateway-metrics.ts).
 */
import { expect, test } from 'bun:test';
import { GatewayMetrics } from '../../src/observe/gateway-metrics.ts';
import { ProxyMetrics } from '../../src/observe/proxy-metrics.ts';
import { replicaMetrics } from '../../src/observe/replica-metrics.ts';

test('the proxy and gateway /metrics texts include the engine replica series', async () => {
  replicaMetrics().requests.inc({ replica: 'http://127.0.0.1:1/exposition-test' }, 3);
  const line = 'polar_engine_replica_requests_total{replica="http://127.0.0.1:1/exposition-test"} 3';
  const proxy = new ProxyMetrics('vllm');
  expect(await proxy.text()).toContain(line);
  expect(await proxy.text()).toContain('# TYPE polar_proxy_requests_total counter');
  const gateway = new GatewayMetrics({
    stageCounts: () => ({ queued: 0, init: 0, ready: 0, running: 0, postrun: 0 }),
    capacity: { init_workers: 1, ready_buffer: 1, max_run_workers: 1, postrun_workers: 1 },
  });
  const { text } = await gateway.text([proxy.registry]);
  expect(text).toContain(line);
  expect(text).toContain('# TYPE polar_proxy_requests_total counter');
});
