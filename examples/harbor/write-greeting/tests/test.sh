#!/bin/bash
# Partial credit: reward.json holds one score per check; the reward is their mean.
mkdir -p /logs/verifier
exists=0
content=0
if [ -f /app/hello.txt ]; then exists=1; fi
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then content=1; fi
printf '{"exists": %d, "content": %d}\n' "$exists" "$content" > /logs/verifier/reward.json
