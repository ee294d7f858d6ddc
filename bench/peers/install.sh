#!/bin/sh
# Installs the peer gateways of bench/proxy-peers.ts into bench/.peers/ (git-ignored; the product never depends on
# them). Versions and overrides follow docs/protocol-notes.md#peer-gateways: claude-code-router 2.0.0 (3.1.1 has a dependency the
# registry here does not serve) and Portkey gateway 1.15.2 with @hono/node-server 1.13.5 + hono 4.9.7 pinned, without
# which its streaming answers 500. Idempotent: an existing install of the right version is kept.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
peers="$here/../.peers"
mkdir -p "$peers/ccr" "$peers/portkey"

if [ ! -f "$peers/ccr/node_modules/@musistudio/claude-code-router/package.json" ]; then
  cat > "$peers/ccr/package.json" <<'JSON'
{ "name": "polar-bench-peer-ccr", "private": true,
  "dependencies": { "@musistudio/claude-code-router": "2.0.0" } }
JSON
  (cd "$peers/ccr" && npm install --no-audit --no-fund --ignore-scripts)
fi

if [ ! -f "$peers/portkey/node_modules/@portkey-ai/gateway/package.json" ]; then
  cat > "$peers/portkey/package.json" <<'JSON'
{ "name": "polar-bench-peer-portkey", "private": true,
  "dependencies": { "@portkey-ai/gateway": "1.15.2" },
  "overrides": { "@hono/node-server": "1.13.5", "hono": "4.9.7" } }
JSON
  (cd "$peers/portkey" && npm install --no-audit --no-fund --ignore-scripts)
fi

node -e 'for (const p of process.argv.slice(1)) { const j = require(p); console.log(`${j.name}@${j.version}`); }' \
  "$peers/ccr/node_modules/@musistudio/claude-code-router/package.json" \
  "$peers/portkey/node_modules/@portkey-ai/gateway/package.json" \
  "$peers/portkey/node_modules/hono/package.json" \
  "$peers/portkey/node_modules/@hono/node-server/package.json"
