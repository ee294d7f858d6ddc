/**
 * examples/kubernetes/polar.yaml: the manifests parse, name the kinds and fields Kubernetes needs, agree with the
 * polar config they carry (ports, probe paths, rollout URL, engine port), and the Secret's key is the env var polar
 * reads for the control-plane token. The probe path is fetched from a real rollout server and gateway node.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { parseConfigText, resolveConfig } from '../../src/config/load.ts';
import { GatewayNode } from '../../src/gateway/node.ts';
import { RolloutServer } from '../../src/rollout/server.ts';
import { openStore } from '../../src/store/index.ts';

const file = join(resolve(import.meta.dir, '..', '..'), 'examples/kubernetes/polar.yaml');
const docs = parseAllDocuments(readFileSync(file, 'utf8')).map((d) => {
  expect(d.errors).toEqual([]);
  return d.toJS() as Record<string, any>;
});
const byKind = (kind: string) => docs.filter((d) => d.kind === kind);
const one = (kind: string) => {
  const found = byKind(kind);
  expect(found.length).toBe(1);
  return found[0]!;
};
const container = (workload: Record<string, any>, name: string) => workload.spec.template.spec.containers.find((c: any) => c.name === name);
const envOf = (c: any, name: string) => c.env.find((e: any) => e.name === name);

const secret = one('Secret');
const configMap = one('ConfigMap');
const deployment = one('Deployment');
const service = one('Service');
const daemonSet = one('DaemonSet');
const tokenKey = Object.keys(secret.stringData)[0]!;
const tokenValue = secret.stringData[tokenKey] as string;
const podEnv = { NODE_NAME: 'gpu-node-1', POD_IP: '10.1.2.3', [tokenKey]: tokenValue };
const rolloutConfig = resolveConfig(parseConfigText(configMap.data['rollout.yaml'], 'rollout.yaml'), { env: podEnv });
const gatewayConfig = resolveConfig(parseConfigText(configMap.data['gateway.yaml'], 'gateway.yaml'), { env: podEnv });

describe('examples/kubernetes', () => {
  test('kinds and API versions', () => {
    expect(docs.map((d) => `${d.apiVersion}/${d.kind}`).sort()).toEqual(['apps/v1/DaemonSet', 'apps/v1/Deployment', 'v1/ConfigMap', 'v1/Secret', 'v1/Service']);
    for (const d of docs) expect(d.metadata.name).toMatch(/^[a-z0-9-]+$/);
    for (const w of [deployment, daemonSet]) expect(w.spec.selector.matchLabels).toEqual(w.spec.template.metadata.labels);
    expect(service.spec.selector).toEqual(deployment.spec.template.metadata.labels);
  });

  test("the Secret's key is the env var polar reads for the control-plane token, wired into both workloads", () => {
    expect(rolloutConfig.rollout.control_plane_token).toBe(tokenValue);
    expect(resolveConfig(parseConfigText(configMap.data['rollout.yaml'], 'rollout.yaml'), { env: {} }).rollout.control_plane_token).toBeNull();
    for (const c of [container(deployment, 'rollout'), container(daemonSet, 'gateway')]) {
      expect(envOf(c, tokenKey).valueFrom.secretKeyRef).toEqual({ name: secret.metadata.name, key: tokenKey });
    }
  });

  test('ports, commands and probes agree with the config they run', () => {
    const rollout = container(deployment, 'rollout');
    expect(rollout.image).toMatch(/^polar:/);
    expect(rollout.command.slice(0, 4)).toEqual(['polar', 'rollout', '--config', '/etc/polar/rollout.yaml']);
    expect(rollout.ports[0].containerPort).toBe(rolloutConfig.rollout.port);
    expect(rolloutConfig.rollout.host).toBe('0.0.0.0');
    for (const probe of [rollout.readinessProbe, rollout.livenessProbe]) expect(probe.httpGet).toEqual({ path: '/health', port: rolloutConfig.rollout.port });
    expect(service.spec.ports[0].targetPort).toBe(rolloutConfig.rollout.port);

    const gateway = container(daemonSet, 'gateway');
    const node = gatewayConfig.gateway.nodes[0]!;
    expect(gateway.command).toEqual(['polar', 'gateway', '--config', '/etc/polar/gateway.yaml', '--node-id', '$(NODE_NAME)']);
    expect(node.node_id).toBe(podEnv.NODE_NAME);
    expect(node.public_url).toBe(`http://${podEnv.POD_IP}:${node.port}`);
    expect(envOf(gateway, 'NODE_NAME').valueFrom.fieldRef.fieldPath).toBe('spec.nodeName');
    expect(envOf(gateway, 'POD_IP').valueFrom.fieldRef.fieldPath).toBe('status.podIP');
    expect(gateway.ports[0].containerPort).toBe(node.port);
    for (const probe of [gateway.readinessProbe, gateway.livenessProbe]) expect(probe.httpGet).toEqual({ path: '/health', port: node.port });
    // The gateway reaches the rollout server through the Service.
    expect(gatewayConfig.gateway.rollout_url).toBe(`http://${service.metadata.name}:${service.spec.ports[0].port}`);
    // The engine runs next to the gateway, on the port the config points at, with a GPU.
    const engine = container(daemonSet, 'engine');
    expect(engine.image).toMatch(/sglang/);
    expect(gatewayConfig.engine.kind).toBe('sglang');
    const url = new URL(gatewayConfig.engine.url);
    expect(url.hostname).toBe('127.0.0.1');
    expect(engine.command[engine.command.indexOf('--port') + 1]).toBe(url.port);
    expect(engine.resources.limits['nvidia.com/gpu']).toBe(1);
  });

  const stops: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop();
  });

  test('the probe path answers 200 without the token on a real rollout server and gateway node', async () => {
    const store = openStore(':memory:');
    stops.push(() => store.close());
    const server = new RolloutServer({ store, port: 0, tickMs: 60_000, controlPlaneToken: tokenValue }).start();
    stops.push(() => server.stop());
    const path = container(deployment, 'rollout').readinessProbe.httpGet.path;
    expect((await fetch(`${server.url}${path}`)).status).toBe(200);
    expect((await fetch(`${server.url}/rollout/status`)).status).toBe(401);
    const node = new GatewayNode({ nodeId: 'probe', port: 0, store, workRoot: '/nonexistent', controlPlaneToken: tokenValue } as ConstructorParameters<typeof GatewayNode>[0]);
    await node.start();
    stops.push(() => node.stop());
    expect((await fetch(`${node.url}${container(daemonSet, 'gateway').readinessProbe.httpGet.path}`)).status).toBe(200);
  });
});
