/** docs/config.md is generated from the schema and must be current; every example config must validate, and the README names the environment variables each one needs. */
import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { renderConfigDocs } from '../../src/config/docs.ts';
import { loadConfig } from '../../src/config/load.ts';

const root = resolve(import.meta.dir, '..', '..');

test('docs/config.md matches the schema (regenerate: bun src/main.ts config docs > docs/config.md)', () => {
  expect(readFileSync(join(root, 'docs/config.md'), 'utf8')).toBe(renderConfigDocs());
});

test('the reference documents every field of every section', () => {
  const docs = renderConfigDocs();
  for (const key of ['engine.default_sampling', 'gateway.nodes', 'gateway.nodes[].runtime', 'max_run_workers', 'control_plane_token', 'POLAR_ENGINE_API_KEY', 'keepalive_interval_ms', 'heartbeat_timeout_s']) {
    expect(docs).toContain(key);
  }
  // A field without a description would render an empty last cell.
  expect(docs).not.toMatch(/\| \|$/m);
});

const examples = readdirSync(join(root, 'examples/config')).filter((name) => /\.(ya?ml|json)$/.test(name));

test('examples/config has examples to check', () => {
  expect(examples.length).toBeGreaterThanOrEqual(1);
  expect(examples).toContain('single-box.yaml');
});

for (const name of examples) {
  test(`examples/config/${name}: the README names every environment variable it needs`, () => {
    // `polar config check` exits 2 while a referenced variable is unset, so a reader must learn of each one.
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const text = readFileSync(join(root, 'examples/config', name), 'utf8').replace(/^\s*#.*$/gm, ''); // YAML comments need nothing
    for (const [, variable] of text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)) {
      expect(readme).toContain(variable!);
    }
  });

  test(`examples/config/${name} is a valid config`, () => {
    const path = join(root, 'examples/config', name);
    // Examples may reference secrets as ${NAME}; give each referenced variable a placeholder.
    const env = Object.fromEntries([...readFileSync(path, 'utf8').matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => [m[1]!, 'placeholder']));
    expect(() => loadConfig(path, { env })).not.toThrow();
  });
}
