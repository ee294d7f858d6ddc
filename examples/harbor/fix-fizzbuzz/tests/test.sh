#!/bin/bash
# Harbor verifier: exit 0 and write the reward to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if python3 /tests/test_outputs.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
